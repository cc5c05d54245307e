/**
 * Orthanc (Debian packages `orthanc` and `orthanc-dicomweb`, installed by `.ci/run`) as a real DICOM
 * sender: started on a temporary directory and free ports, with the service under test as its DICOMweb
 * server and its DICOM modality. Tests and the DICOM receiving bench use it.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from './ports.ts';

export const ORTHANC_BINARY = '/usr/sbin/Orthanc';
export const DICOMWEB_PLUGIN = '/usr/share/orthanc/plugins/libOrthancDicomWeb.so';
/** The Modality Worklists sample plugin of Debian's `orthanc` (answers C-FIND from a folder of `.wl` files). */
export const WORKLISTS_PLUGIN = '/usr/share/orthanc/plugins/libModalityWorklists.so';

/** Why Orthanc tests cannot run here, or undefined when they can. */
export function orthancMissing(): string | undefined {
  if (!existsSync(ORTHANC_BINARY)) return `${ORTHANC_BINARY} is not installed (Debian package orthanc)`;
  if (!existsSync(DICOMWEB_PLUGIN)) return `${DICOMWEB_PLUGIN} is not installed (orthanc-dicomweb)`;
  if (!existsSync(WORKLISTS_PLUGIN)) return `${WORKLISTS_PLUGIN} is not installed (orthanc)`;
  return undefined;
}

export interface OrthancOptions {
  /** The service as a DICOMweb server named `cra`: its DICOMweb root URL and Basic credentials. */
  readonly dicomWeb?: { readonly url: string; readonly username: string; readonly password: string };
  /** The service as a DICOM modality named `cra`. */
  readonly modality?: { readonly aeTitle: string; readonly port: number };
  /** Orthanc's own AE title (the calling AE title of its C-STOREs). */
  readonly aeTitle?: string;
  /**
   * A folder of `.wl` files for the worklists plugin, loaded with it; Orthanc then answers a worklist
   * C-FIND from any calling AE title.
   */
  readonly worklistsDirectory?: string;
}

export interface Orthanc {
  readonly httpUrl: string;
  readonly dicomPort: number;
  readonly aeTitle: string;
  /** The Orthanc process (for its memory). */
  readonly pid: number;
  /** POST to Orthanc's REST API; resolves to the parsed JSON answer, throws on a non-2xx status. */
  post(pathname: string, body: Buffer | object): Promise<unknown>;
  /** Uploads a Part 10 file; resolves to Orthanc's instance id. */
  upload(file: Buffer): Promise<string>;
  stop(): Promise<void>;
}

/** Starts Orthanc and resolves once its REST API answers (within `timeoutMs`). */
export async function startOrthanc(options: OrthancOptions, timeoutMs = 60_000): Promise<Orthanc> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-orthanc-'));
  const [httpPort, dicomPort] = [await freePort(), await freePort()];
  const aeTitle = options.aeTitle ?? 'ORTHANC';
  const config = {
    Name: 'cra-test',
    StorageDirectory: path.join(dir, 'storage'),
    IndexDirectory: path.join(dir, 'index'),
    HttpPort: httpPort,
    DicomPort: dicomPort,
    DicomAet: aeTitle,
    RemoteAccessAllowed: false,
    AuthenticationEnabled: false,
    HttpTimeout: 120,
    DicomScuTimeout: 60,
    StableAge: 3600,
    Plugins:
      options.worklistsDirectory === undefined ? [DICOMWEB_PLUGIN] : [DICOMWEB_PLUGIN, WORKLISTS_PLUGIN],
    ...(options.worklistsDirectory === undefined
      ? {}
      : {
          Worklists: { Enable: true, Database: options.worklistsDirectory },
          DicomAlwaysAllowFind: true,
          DicomAlwaysAllowFindWorklist: true,
        }),
    DicomWeb: {
      Enable: true,
      Root: '/dicom-web/',
      Servers:
        options.dicomWeb === undefined
          ? {}
          : {
              cra: {
                Url: options.dicomWeb.url,
                Username: options.dicomWeb.username,
                Password: options.dicomWeb.password,
              },
            },
    },
    DicomModalities:
      options.modality === undefined
        ? {}
        : { cra: [options.modality.aeTitle, '127.0.0.1', options.modality.port] },
  };
  const configFile = path.join(dir, 'orthanc.json');
  await writeFile(configFile, JSON.stringify(config));
  const child: ChildProcess = spawn(ORTHANC_BINARY, [configFile], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    log = (log + chunk.toString()).slice(-4000);
  });
  const httpUrl = `http://127.0.0.1:${httpPort}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode !== null) {
      await stop();
      throw new Error(`Orthanc exited (${child.exitCode}): ${log}`);
    }
    try {
      const response = await fetch(`${httpUrl}/system`);
      if (response.ok) break;
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`Orthanc did not start within ${timeoutMs} ms: ${log}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }

  const post = async (pathname: string, body: Buffer | object): Promise<unknown> => {
    const response = await fetch(`${httpUrl}${pathname}`, {
      method: 'POST',
      headers: { 'content-type': Buffer.isBuffer(body) ? 'application/dicom' : 'application/json' },
      body: Buffer.isBuffer(body) ? body : JSON.stringify(body),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`Orthanc ${pathname}: ${response.status} ${text.slice(0, 500)}`);
    return text === '' ? undefined : (JSON.parse(text) as unknown);
  };
  return {
    httpUrl,
    dicomPort,
    aeTitle,
    pid: child.pid!,
    post,
    async upload(file) {
      const answer = (await post('/instances', file)) as { ID: string };
      return answer.ID;
    },
    stop,
  };
}
