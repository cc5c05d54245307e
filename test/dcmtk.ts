/**
 * dcmtk's command-line tools (Debian package `dcmtk`, installed by `.ci/run`) as real DICOM senders for
 * the C-STORE SCP tests, and a TCP relay that cuts a connection after a given number of bytes.
 */
import { spawn } from 'node:child_process';
import type { Server, Socket } from 'node:net';
import { connect, createServer } from 'node:net';

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
