/**
 * A PAS answering QBP^Q22 with RSP^K21 on 127.0.0.1 (port 0), for the PAS query's tests and bench: a
 * real MLLP peer framed by `@medplum/hl7`'s `Hl7Connection` (the connection `Hl7Server` wraps each
 * socket in; its own `start` listens on every interface, so the socket is this file's, bound to
 * 127.0.0.1). What it answers for a number is set per number; every query it read is kept.
 */
import { Hl7Message } from '@medplum/core';
import { Hl7Connection } from '@medplum/hl7';
import type { Hl7MessageEvent } from '@medplum/hl7';
import type { AddressInfo, Socket } from 'node:net';
import { createServer } from 'node:net';

/** A synthetic patient the PAS knows. */
export interface PeerPatient {
  readonly surname: string;
  readonly given: string;
  /** `YYYYMMDD`. */
  readonly dob: string;
  readonly sex: string;
}

/** What the peer answers for a number: the patient, NF, unreadable bytes, another number's PID, or nothing. */
export type PeerBehaviour =
  | { readonly kind: 'found'; readonly patient: PeerPatient; readonly delayMs?: number }
  | { readonly kind: 'not-found' }
  | { readonly kind: 'garbage' }
  | { readonly kind: 'other-number'; readonly patient: PeerPatient }
  | { readonly kind: 'error' }
  | { readonly kind: 'silent' };

export interface ReceivedQuery {
  readonly number: string;
  readonly authority: string;
  readonly messageType: string;
  /** MSH-5^MSH-6. */
  readonly receiver: string;
  /** QPD-1, the query's name. */
  readonly queryName: string;
  /** RCP-1^RCP-2 (priority, quantity limit). */
  readonly rcp: string;
}

export interface PasPeer {
  readonly port: number;
  /** What it answers for `number` (unset numbers: NF). */
  set(number: string, behaviour: PeerBehaviour): void;
  /** The queries read so far, in order. */
  readonly received: readonly ReceivedQuery[];
  close(): Promise<void>;
}

/** The PID segment the peer sends (and an A28 of the same patient carries). */
export function peerPid(number: string, patient: PeerPatient): string {
  return (
    `PID|1||${number}^^^PAS^MR||${patient.surname}^${patient.given}^Jo^^mrs||${patient.dob}|${patient.sex}` +
    `|||1 Test Road^Flat 2^Testtown^Testshire^TE1 1ST^^H||01134960000|07700900000`
  );
}

export async function startPasPeer(): Promise<PasPeer> {
  const behaviours = new Map<string, PeerBehaviour>();
  const received: ReceivedQuery[] = [];
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();

  function answer(query: Hl7Message): { text?: string; raw?: string; delayMs?: number } | undefined {
    const msh = query.getSegment('MSH');
    const controlId = msh?.getField(10)?.toString() ?? '';
    const qpd = query.getSegment('QPD');
    const tag = qpd?.getField(2)?.toString() ?? '';
    const parameters = qpd?.getField(3);
    let number = '';
    let authority = '';
    for (let i = 0; i < (parameters?.components.length ?? 0); i += 1) {
      const name = parameters?.getComponent(1, undefined, i) ?? '';
      const value = parameters?.getComponent(2, undefined, i) ?? '';
      if (name === '@PID.3.1') number = value;
      if (name === '@PID.3.4') authority = value;
    }
    const rcp = query.getSegment('RCP');
    received.push({
      number,
      authority,
      messageType: msh?.getField(9)?.toString() ?? '',
      receiver: `${msh?.getField(5)?.toString() ?? ''}^${msh?.getField(6)?.toString() ?? ''}`,
      queryName: qpd?.getField(1)?.toString() ?? '',
      rcp: `${rcp?.getField(1)?.toString() ?? ''}|${rcp?.getField(2)?.toString() ?? ''}`,
    });
    const behaviour = behaviours.get(number) ?? { kind: 'not-found' };
    const header = `MSH|^~\\&|PAS|RHS|CRA|EYE|20261204120000||RSP^K22^RSP_K21|R${controlId}|P|2.5`;
    const echo = `QPD|Q22^Find Candidates^HL7nnnn|${tag}|@PID.3.1^${number}~@PID.3.4^${authority}`;
    switch (behaviour.kind) {
      case 'silent':
        return undefined;
      case 'garbage':
        return { raw: 'this is not HL7 at all' };
      case 'error':
        return { text: [header, `MSA|AE|${controlId}|query refused`, `QAK|${tag}|AE`, echo].join('\r') };
      case 'not-found':
        return { text: [header, `MSA|AA|${controlId}`, `QAK|${tag}|NF`, echo].join('\r') };
      case 'other-number':
        return {
          text: [
            header,
            `MSA|AA|${controlId}`,
            `QAK|${tag}|OK`,
            echo,
            peerPid(`9${number}`, behaviour.patient),
          ].join('\r'),
        };
      case 'found':
        return {
          text: [
            header,
            `MSA|AA|${controlId}`,
            `QAK|${tag}|OK`,
            echo,
            peerPid(number, behaviour.patient),
            'PD1|||',
          ].join('\r'),
          ...(behaviour.delayMs === undefined ? {} : { delayMs: behaviour.delayMs }),
        };
    }
  }

  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    const connection = new Hl7Connection(socket, 'latin1');
    connection.addEventListener('message', (event: Hl7MessageEvent) => {
      const reply = answer(event.message);
      if (reply === undefined) return;
      const send = () => {
        if (socket.destroyed) return;
        if (reply.raw !== undefined) socket.write(`\x0b${reply.raw}\x1c\r`);
        else connection.send(Hl7Message.parse(reply.text!));
      };
      if (reply.delayMs === undefined) send();
      else {
        const timer = setTimeout(() => {
          timers.delete(timer);
          send();
        }, reply.delayMs);
        timers.add(timer);
      }
    });
    connection.addEventListener('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    set: (number, behaviour) => behaviours.set(number, behaviour),
    received,
    async close() {
      for (const timer of timers) clearTimeout(timer);
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A port on 127.0.0.1 that nothing listens on (listened on, then closed). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
