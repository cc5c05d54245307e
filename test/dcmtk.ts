/**
 * dcmtk's command-line tools (Debian package `dcmtk`, installed by `.ci/run`) as real DICOM senders for
 * the C-STORE SCP tests, `storescp` as a retrieve destination, and a TCP relay that cuts a connection
 * after a given number of bytes.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import type { Server, Socket } from 'node:net';
import { connect, createServer } from 'node:net';
import { freePort } from './ports.ts';

export interface ToolResult {
  readonly code: number | null;
  /** stdout and stderr together. */
  readonly output: string;
}

/** Runs a dcmtk tool, killed after `timeoutMs`. */
export function runDcmtk(tool: string, args: readonly string[], timeoutMs = 120_000): Promise<ToolResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(tool, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

export interface Storescp {
  readonly port: number;
  readonly child: ChildProcess;
  stop(): void;
}

/**
 * dcmtk's `storescp` as AE title `aeTitle` on a free port of 127.0.0.1, writing what it receives bit for
 * bit into `dir`. A port found free can be taken by another process before storescp binds it (test files
 * run side by side), and an echo answered there proves nothing: so it is listening once its own log shows
 * the echo received, and a storescp that exits first (the port taken) is started again on another port.
 */
export async function startStorescp(dir: string, aeTitle = 'DEST', attempts = 5): Promise<Storescp> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const child = spawn('storescp', ['-v', '-aet', aeTitle, '+B', '-od', dir, String(port)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let log = '';
    child.stdout?.on('data', (chunk: Buffer) => (log += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (log += chunk.toString()));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const deadline = Date.now() + 10_000;
    while (child.exitCode === null && child.signalCode === null && Date.now() < deadline) {
      await runDcmtk('echoscu', ['-aec', aeTitle, '127.0.0.1', String(port)], 5_000);
      if (log.includes('Received Echo Request')) {
        // Its log is no longer needed; keep the pipes drained.
        child.stdout?.removeAllListeners('data').resume();
        child.stderr?.removeAllListeners('data').resume();
        return { port, child, stop: () => child.kill() };
      }
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 20))]);
    }
    child.kill();
    if (attempt >= attempts)
      throw new Error(`storescp did not start on 127.0.0.1 (${attempts} ports tried): ${log}`);
  }
}

export interface CuttingRelay {
  readonly port: number;
  /** Resolves once the relay has cut a connection. */
  readonly cut: Promise<void>;
  close(): Promise<void>;
}

/**
 * A relay on 127.0.0.1 to `targetPort` that forwards both ways and destroys both sockets once the client
 * has sent `cutAfterBytes` bytes: a sender that loses its connection in the middle of a transfer.
 */
export async function startCuttingRelay(targetPort: number, cutAfterBytes: number): Promise<CuttingRelay> {
  let markCut: () => void = () => {};
  const cut = new Promise<void>((resolve) => (markCut = resolve));
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(targetPort, '127.0.0.1');
    sockets.add(client).add(upstream);
    let sent = 0;
    client.on('data', (chunk: Buffer) => {
      const room = cutAfterBytes - sent;
      sent += chunk.length;
      if (room > 0) upstream.write(room >= chunk.length ? chunk : chunk.subarray(0, room));
      if (sent >= cutAfterBytes) {
        client.destroy();
        upstream.destroy();
        markCut();
      }
    });
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    for (const socket of [client, upstream]) {
      socket.on('error', () => {});
      socket.on('close', () => {
        client.destroy();
        upstream.destroy();
      });
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    port,
    cut,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
