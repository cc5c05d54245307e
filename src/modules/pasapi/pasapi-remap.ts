/**
 * Value remapping (`pasapi_xpath_remap`, `pasapi_remap_value`), applied to a request's element tree
 * before it is read, as OpenEyes applies them to the document: each element an XPath selects whose text
 * equals a value's `input` exactly gets the `output` text; an `output` of NULL removes the element.
 *
 * The rows that apply are those whose `xpath` starts with `/<Root>` and whose `institution_id` is the
 * URL identifier type's institution, or NULL (a rule for every institution). OpenEyes uses the session's
 * institution, so its remaps never apply to requests without an identifier type (P26).
 *
 * XPaths are the absolute child paths OpenEyes's admin screen stores (`/Patient/EthnicGroup`,
 * `/Patient/AddressList/Address/Type`), with `*` for any name; a rule with other syntax is skipped and
 * reported (the caller logs it).
 */
import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { XmlElement } from './pasapi-xml.ts';

export interface RemapRule {
  readonly xpath: string;
  /** input -> output (null removes the element). */
  readonly values: ReadonlyMap<string, string | null>;
}

/** The remap rules for documents with root `root`, of `institutionId` or of every institution. */
export async function loadRemapRules(
  db: Kysely<DB>,
  root: string,
  institutionId: number | undefined,
): Promise<RemapRule[]> {
  const rows = await db
    .selectFrom('pasapi_xpath_remap as x')
    .innerJoin('pasapi_remap_value as v', 'v.xpath_id', 'x.id')
    .select(['x.id', 'x.xpath', 'v.input', 'v.output'])
    .where('x.xpath', 'like', `/${root}%`)
    .where((eb) =>
      institutionId === undefined
        ? eb('x.institution_id', 'is', null)
        : eb.or([eb('x.institution_id', 'is', null), eb('x.institution_id', '=', institutionId)]),
    )
    .orderBy('x.id')
    .orderBy('v.id')
    .execute();
  const byId = new Map<number, { xpath: string; values: Map<string, string | null> }>();
  for (const row of rows) {
    let rule = byId.get(row.id);
    if (rule === undefined) {
      rule = { xpath: row.xpath, values: new Map() };
      byId.set(row.id, rule);
    }
    if (!rule.values.has(row.input)) rule.values.set(row.input, row.output);
  }
  return [...byId.values()];
}

const STEP = /^(?:\*|[A-Za-z_][\w.-]*)$/;

/** The path's steps, or undefined for syntax this reader does not follow. */
function stepsOf(xpath: string): string[] | undefined {
  if (!xpath.startsWith('/') || xpath.startsWith('//')) return undefined;
  const steps = xpath.slice(1).split('/');
  return steps.every((s) => STEP.test(s)) ? steps : undefined;
}

export interface RemapOutcome {
  readonly root: XmlElement;
  /** XPaths skipped because their syntax is not followed. */
  readonly skipped: readonly string[];
}

/** `root` with every rule applied, in rule order. */
export function applyRemaps(root: XmlElement, rules: readonly RemapRule[]): RemapOutcome {
  let current = root;
  const skipped: string[] = [];
  for (const rule of rules) {
    const steps = stepsOf(rule.xpath);
    if (steps === undefined) {
      skipped.push(rule.xpath);
      continue;
    }
    if (steps[0] !== '*' && steps[0] !== current.name) continue;
    const next = remapElement(current, steps.slice(1), rule.values);
    if (next !== undefined) current = next;
  }
  return { root: current, skipped };
}

/** The element after the rule (undefined: removed). */
function remapElement(
  element: XmlElement,
  rest: readonly string[],
  values: ReadonlyMap<string, string | null>,
): XmlElement | undefined {
  if (rest.length === 0) {
    if (!values.has(element.text)) return element;
    const output = values.get(element.text)!;
    return output === null ? undefined : { ...element, text: output };
  }
  const [step, ...tail] = rest;
  const children: XmlElement[] = [];
  for (const child of element.children) {
    if (step !== '*' && child.name !== step) children.push(child);
    else {
      const next = remapElement(child, tail, values);
      if (next !== undefined) children.push(next);
    }
  }
  return { ...element, children };
}
