/**
 * A flame graph (SVG) of a V8 `.cpuprofile`, restricted to a time window.
 *
 * Each box is a function in its call path; its width is the sampled time spent in it and in what it
 * called (inclusive), its label and tooltip the microseconds per request. Boxes narrower than
 * `minShare` of the total are left out (their time stays in their parent's width), which keeps the
 * file small enough to commit. Colours group frames by origin (this project, npm packages, Node, V8).
 *
 * Written here rather than taken from a library: the flame graph tools on npm either profile a whole
 * process themselves (`0x`) or are browser components (d3/React flame graphs) that need the page
 * around them; Brendan Gregg's `flamegraph.pl` is not packaged for Debian. This needs only the samples
 * the bench already reads, limited to its measured window.
 */

export interface ProfileNode {
  readonly id: number;
  readonly callFrame: { functionName: string; url: string; lineNumber: number };
  readonly children?: readonly number[];
}

export interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

export interface FlameGraphOptions {
  readonly title: string;
  /** Sampled time is divided by this for the labels (requests in the window). */
  readonly requests: number;
  /** Which samples count, in the profile's microsecond clock. */
  readonly windowUs: readonly [number, number];
  /** Where a frame's code lives, for its colour and label. */
  readonly originOf: (url: string) => string;
  readonly width?: number;
  readonly minShare?: number;
}

interface Frame {
  readonly name: string;
  readonly origin: string;
  totalUs: number;
  readonly children: Map<string, Frame>;
}

const ROW_HEIGHT = 17;

function escapeXml(text: string): string {
  return text.replace(/[<>&"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function colourOf(origin: string): string {
  if (origin.startsWith('src/')) return '#e8a33d'; // this project
  if (origin === 'node') return '#6fa8dc';
  if (
    origin === '' ||
    origin === '(V8 / native)' ||
    origin === '(program)' ||
    origin === '(garbage collector)'
  )
    return '#c0c0c0';
  return '#93c47d'; // npm packages
}

/** Merges the profile's call tree by function (same name and place under the same parent path). */
function buildTree(profile: CpuProfile, options: FlameGraphOptions): Frame {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const selfUs = new Map<number, number>();
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i]!;
    t += delta;
    if (t < options.windowUs[0] || t > options.windowUs[1]) continue;
    const node = byId.get(profile.samples[i]!)!;
    if (node.callFrame.functionName === '(idle)') continue;
    selfUs.set(node.id, (selfUs.get(node.id) ?? 0) + delta);
  }
  const root: Frame = { name: 'all', origin: '', totalUs: 0, children: new Map() };
  for (const [id, us] of selfUs) {
    const path: ProfileNode[] = [];
    for (let n: number | undefined = id; n !== undefined; n = parentOf.get(n)) path.push(byId.get(n)!);
    path.reverse();
    let frame = root;
    frame.totalUs += us;
    // The profile's own root node, "(root)", is the graph's "all".
    for (const node of path.slice(1)) {
      const { functionName, url, lineNumber } = node.callFrame;
      const origin = functionName.startsWith('(') && url === '' ? functionName : options.originOf(url);
      const name = `${functionName || '(anonymous)'}${url === '' ? '' : ` ${origin}:${lineNumber + 1}`}`;
      let child = frame.children.get(name);
      if (child === undefined) {
        child = { name, origin, totalUs: 0, children: new Map() };
        frame.children.set(name, child);
      }
      child.totalUs += us;
      frame = child;
    }
  }
  return root;
}

export function flameGraphSvg(profile: CpuProfile, options: FlameGraphOptions): string {
  const width = options.width ?? 1600;
  const minShare = options.minShare ?? 0.002;
  const root = buildTree(profile, options);
  const total = Math.max(root.totalUs, 1);
  const perRequest = (us: number) => (us / options.requests).toFixed(2);
  const boxes: string[] = [];
  let depthMax = 0;
  const place = (frame: Frame, x: number, depth: number) => {
    const w = (frame.totalUs / total) * width;
    depthMax = Math.max(depthMax, depth);
    const label = `${frame.name}: ${perRequest(frame.totalUs)} us/request (${((frame.totalUs / total) * 100).toFixed(1)}%)`;
    boxes.push(
      `<g><title>${escapeXml(label)}</title><rect x="${x.toFixed(1)}" y="${depth}" width="${w.toFixed(1)}" height="${ROW_HEIGHT - 1}" fill="${colourOf(frame.origin)}"/>` +
        (w > 40
          ? `<text x="${(x + 3).toFixed(1)}" y="${depth}" dy="12">${escapeXml(label.slice(0, Math.floor((w - 6) / 6.5)))}</text>`
          : '') +
        '</g>',
    );
    let childX = x;
    for (const child of [...frame.children.values()].sort((a, b) => b.totalUs - a.totalUs)) {
      if (child.totalUs / total < minShare) continue;
      place(child, childX, depth + 1);
      childX += (child.totalUs / total) * width;
    }
  };
  place(root, 0, 0);
  // Depth is placed as a row index above; turn rows into y so that callers sit below their callees.
  const rows = depthMax + 1;
  const top = 40;
  const height = top + rows * ROW_HEIGHT + 10;
  const svgBoxes = boxes.map((box) =>
    box.replace(
      / y="(\d+)"/g,
      (_m, depth: string) => ` y="${top + (rows - 1 - Number(depth)) * ROW_HEIGHT}"`,
    ),
  );
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="monospace" font-size="11">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="4" y="16" font-size="14">${escapeXml(options.title)}</text>`,
    `<text x="4" y="32" fill="#555">width: main-thread time including callees, ${perRequest(total)} us per request sampled; orange this project, green npm packages, blue Node, grey V8/native; hover for each frame's figure</text>`,
    ...svgBoxes,
    '</svg>',
    '',
  ].join('\n');
}
