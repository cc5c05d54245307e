// test-needs: processes
/**
 * The README's "Try every endpoint" examples, run as written against the real server on the demo data:
 * each `sh` block of that section, in order, in one bash script. Only what a reader must change is
 * changed: the address (the server listens on a free port), and `CODE` / `EXTRA_INFO`, which the reader
 * copies from the start-up log (so does this test). Every curl fails the script on an HTTP error.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ConsoleClient } from './factories-console.ts';
import type { TestApp, TestDatabase } from './harness.ts';
import { createTestDatabase, forEachDialect } from './harness.ts';
import { until } from './until.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const SERVER = path.join(ROOT, 'src/main/server.ts');
const SECTION = '### Try every endpoint';
const dcmtkSkip =
  spawnSync('sh', ['-c', 'command -v dump2dcm']).status === 0 ? false : 'dcmtk (dump2dcm) is not installed';
const DEMO_CODE =
  /demo unique code for sign\/add: unique_identifier "([A-Z2-9]{6})", extra_info (\{[^}]*\})/g;

/** The `text` block of the README's quick start: the lines the first start prints. */
async function readmeStartupLines(): Promise<string[]> {
  const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
  const quickStart = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('## Configuration'));
  const block = /```text\n([\s\S]*?)```/.exec(quickStart);
  assert.ok(block !== null, 'the quick start shows the start-up lines');
  return block[1]!.trim().split('\n');
}

/**
 * `npm start` on a terminal: the server under `script`, which gives it a pseudo-terminal as its
 * standard output; resolves with what the terminal showed once the server is ready, then stops it.
 */
async function terminalStart(env: Record<string, string>): Promise<string> {
  const command = [process.execPath, '--disable-warning=ExperimentalWarning', SERVER]
    .map((word) => `'${word}'`)
    .join(' ');
  const child = spawn('script', ['-qfec', command, '/dev/null'], {
    cwd: ROOT,
    env: {
      ...process.env,
      ...env,
      DEMO_DATA: 'on',
      WORKER: 'off',
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  try {
    await until(
      () => {
        if (child.exitCode !== null) throw new Error(`the server exited:\n${output}`);
        return output.includes('clinical-records-api ready');
      },
      { timeoutMs: 60_000, intervalMs: 50 },
    );
  } finally {
    // The whole group: `script` and the server on its terminal.
    if (child.exitCode === null) process.kill(-child.pid!, 'SIGKILL');
  }
  return output.replaceAll('\r\n', '\n');
}

/** The `sh` blocks of the README section, in order. */
async function readmeExamples(): Promise<string[]> {
  const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
  const start = readme.indexOf(SECTION);
  assert.ok(start >= 0, `README has "${SECTION}"`);
  const end = readme.indexOf('\n## ', start);
  const section = readme.slice(start, end === -1 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

interface Server {
  readonly child: ChildProcess;
  readonly baseUrl: string;
  readonly output: () => string;
}

/** `npm start` as a user runs it (demo data on), on a free port; resolves once it is ready. */
async function startServer(env: Record<string, string>): Promise<Server> {
  const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', SERVER], {
    cwd: ROOT,
    env: {
      ...process.env,
      ...env,
      DEMO_DATA: 'on',
      WORKER: 'in-process',
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  let port: string | undefined;
  try {
    await until(
      () => {
        const match = /Server listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(output);
        if (match !== null && output.includes('clinical-records-api ready')) port = match[1];
        else if (child.exitCode !== null) throw new Error('the server exited');
        return port !== undefined;
      },
      { timeoutMs: 60_000, intervalMs: 50 },
    );
  } catch {
    child.kill('SIGKILL');
    throw new Error(`server did not start:\n${output}`);
  }
  return { child, baseUrl: `http://127.0.0.1:${port!}`, output: () => output };
}

function runBash(script: string, cwd: string): Promise<{ status: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-c', script], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', reject);
    child.on('close', (status) => {
      clearTimeout(timer);
      resolve({ status, output });
    });
  });
}

describe('the start-up lines on a terminal', () => {
  let testDb: TestDatabase;
  before(async () => {
    testDb = await createTestDatabase('sqlite');
  });
  after(() => testDb.drop());

  it('prints the demo lines as the README shows them, ready to copy', async () => {
    const shown = await terminalStart(testDb.env);
    const lines = shown.split('\n');
    const expected = await readmeStartupLines();
    for (const line of expected) {
      // The code is the only part that differs from start to start: the element ids of a new database
      // are the README's.
      const pattern = new RegExp(
        `^${line.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&').replace('"K7QX2M"', '"[A-Z2-9]{6}"')}$`,
      );
      assert.ok(
        lines.some((l) => pattern.test(l)),
        `the terminal shows a line like ${line}:\n${shown}`,
      );
    }
    assert.equal(lines.filter((l) => l.startsWith('demo unique code for sign/add: ')).length, 5);
  });
});

forEachDialect((dialect) => {
  describe(`README examples against the demo data [${dialect}]`, () => {
    let testDb: TestDatabase;
    let server: Server;
    let workDir: string;
    before(async () => {
      testDb = await createTestDatabase(dialect);
      server = await startServer(testDb.env);
      workDir = await mkdtemp(path.join(tmpdir(), 'cra-readme-'));
    });
    after(async () => {
      server.child.kill('SIGKILL');
      await rm(workDir, { recursive: true, force: true });
      await testDb.drop();
    });

    it('prints the demo account and each demo unique code with its extra_info at the first start', () => {
      const output = server.output();
      assert.match(output, /demo account: username \\"demo\\", password \\"demo-password-change-me\\"/);
      assert.match(
        output,
        /demo console account \(\/console\/\): username \\"operator\\", password \\"operator-password-change-me\\"/,
      );
      const codes = [...output.replaceAll('\\"', '"').matchAll(DEMO_CODE)];
      assert.equal(codes.length, 5, output);
      for (const [, , extraInfo] of codes)
        assert.deepEqual(Object.keys(JSON.parse(extraInfo!) as object), ['e_id', 'e_t_id']);
      assert.doesNotMatch(output, /no user can log in yet/);
    });

    it('finds demo patients with every search example of the README', async () => {
      const searches = (await readmeExamples())
        .join('\n')
        .split('\n')
        .filter((line) => line.includes('/api/v1/patient/search'));
      assert.ok(searches.length >= 2, 'the README has search examples');
      for (const line of searches) {
        const result = await runBash(
          `set -euo pipefail\n${line.replaceAll('http://localhost:8080', server.baseUrl).replace(/^curl /, 'curl --fail-with-body -sS ')}`,
          workDir,
        );
        assert.equal(result.status, 0, result.output);
        const found = JSON.parse(result.output) as unknown[];
        assert.ok(Array.isArray(found) && found.length > 0, `${line} finds demo patients`);
      }
    });

    it('opens every console screen with the demo console account', async () => {
      const target = { request: (p: string, init?: RequestInit) => fetch(`${server.baseUrl}${p}`, init) };
      const browser = new ConsoleClient(target as unknown as TestApp);
      const signedIn = await browser.signIn({
        username: 'operator',
        password: 'operator-password-change-me',
      });
      assert.equal(signedIn.status, 303);
      for (const url of [
        '/console/requests',
        '/console/signatures',
        '/console/attachments',
        '/console/audit',
      ])
        assert.equal((await browser.get(url)).status, 200, url);
    });

    it(
      "files docs/DICOM.md's sample DICOM file on its demo patient, COMPLETE",
      { skip: dcmtkSkip },
      async () => {
        const dicomMd = await readFile(path.join(ROOT, 'docs/DICOM.md'), 'utf8');
        const section = dicomMd.slice(dicomMd.indexOf('## Matching the patient'));
        const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1];
        assert.ok(block !== undefined, 'docs/DICOM.md shows the commands');
        const script = ['set -euo pipefail', block]
          .join('\n')
          .replaceAll('http://localhost:8080', server.baseUrl)
          .replaceAll('docs/sample-dicom.dump', path.join(ROOT, 'docs/sample-dicom.dump'))
          .replace(/(^|\$\()curl /gm, '$1curl --fail-with-body -sS ');
        const result = await runBash(script, workDir);
        assert.equal(result.status, 0, result.output);
        const requestId = /"request_id":(\d+)/.exec(result.output)?.[1];
        assert.ok(requestId !== undefined, result.output);
        let status: { status: string; routines: { routine_name: string; status: string }[] } | undefined;
        await until(
          async () => {
            const answer = await fetch(
              `${server.baseUrl}/api/v1/request/queue/status?request_id=${requestId}`,
              {
                headers: {
                  authorization: `Basic ${Buffer.from('demo:demo-password-change-me').toString('base64')}`,
                },
              },
            );
            status = (await answer.json()) as typeof status;
            return status!.status === 'COMPLETE' || status!.status === 'FAILED';
          },
          { timeoutMs: 60_000, intervalMs: 200, what: 'the sample request done' },
        );
        assert.equal(status!.status, 'COMPLETE', JSON.stringify(status));
        assert.ok(
          status!.routines.some((r) => r.routine_name === 'PATIENT_MATCH' && r.status === 'COMPLETE'),
        );
      },
    );

    it('runs every example of the section as written, each answering 2xx', async () => {
      const [, code, extraInfo] = DEMO_CODE.exec(server.output().replaceAll('\\"', '"')) ?? [];
      DEMO_CODE.lastIndex = 0;
      assert.ok(code !== undefined && extraInfo !== undefined);
      const blocks = await readmeExamples();
      // The README's sample is the first demo event's, as a new database prints it.
      assert.match(
        blocks.join('\n'),
        new RegExp(`^EXTRA_INFO='${extraInfo.replace(/[{}]/g, '\\$&')}'$`, 'm'),
      );
      assert.ok(blocks.length >= 5, 'the section has its examples');
      let script = ['set -euo pipefail', ...blocks].join('\n');
      script = script
        .replaceAll('http://localhost:8080', server.baseUrl)
        .replace(/^CODE='[^']*'$/m, `CODE='${code}'`)
        .replace(/^EXTRA_INFO='[^']*'$/m, `EXTRA_INFO='${extraInfo}'`)
        // An HTTP error fails the script, with the answer's body in the output.
        .replace(/(^|\$\()curl /gm, '$1curl --fail-with-body -sS ');
      assert.match(script, new RegExp(`CODE='${code}'`), 'the README sets CODE on a line of its own');
      const result = await runBash(script, workDir);
      assert.equal(result.status, 0, result.output);
      assert.match(result.output, /"Correct signature saved!"/);
      assert.match(
        result.output,
        /"request_id":\d+,"status":"(RUNNING|COMPLETE)","waiting_for_patient":null,"routines":\[/,
      );
      assert.deepEqual(
        await readFile(path.join(workDir, 'viewed.png')),
        await readFile(path.join(workDir, 'demo.png')),
      );
      const document = JSON.parse(await readFile(path.join(workDir, 'openapi.json'), 'utf8')) as {
        openapi: string;
        paths: Record<string, unknown>;
      };
      assert.equal(document.openapi, '3.1.0');
      // Every path of the OpenAPI document is in the README's endpoint table.
      const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
      const table = readme
        .slice(readme.indexOf('## Endpoints'), readme.indexOf(SECTION))
        .replace(/[[\]]/g, '');
      for (const documented of Object.keys(document.paths)) {
        assert.ok(table.includes(`\`${documented}`), `the README's endpoint table lists ${documented}`);
      }
    });
  });
});
