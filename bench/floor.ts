/**
 * The floor: a bare `node:http` server on 127.0.0.1 that answers every request with fixed bytes (status,
 * headers in order, body) read from the JSON file named by its argument. Started by `startFloor` in
 * bench/lib.ts, in its own process so that it does not share the load generator's CPU. Prints
 * `listening <port>` once ready; stops on SIGTERM.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';

interface FloorSpec {
  status: number;
  headers: [string, string][];
  body: string;
}

const spec = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as FloorSpec;
const body = Buffer.from(spec.body, 'base64');
const headers = spec.headers.flat();

const server = http.createServer((request, response) => {
  const answer = () => {
    response.writeHead(spec.status, headers);
    response.end(body);
  };
  // A request with a body is read to its end first, as the real server must; others are answered at once.
  if (request.headers['content-length'] === undefined && request.headers['transfer-encoding'] === undefined) {
    answer();
  } else {
    request.on('end', answer);
    request.resume();
  }
});
server.keepAliveTimeout = 72_000;
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  if (address !== null && typeof address === 'object') process.stdout.write(`listening ${address.port}\n`);
});
process.once('SIGTERM', () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
