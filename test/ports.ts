/** Ports for the tests' listeners that cannot be handed port 0 (dcmtk's, Orthanc's, a private MariaDB). */
import { createServer } from 'node:net';

/**
 * A port free on 127.0.0.1 now. Another process may take it before the caller binds it; a listener that
 * must be certain checks that it was the one answering (`startStorescp`).
 */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
