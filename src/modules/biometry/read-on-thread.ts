/**
 * Reading a biometry file off the event loop: the reader (`biometry-file.ts`, which loads no database
 * code) runs as a task of the DICOM module's worker threads, under their time and memory limits.
 */
import type { Config } from '../../config.ts';
import type { DicomTask } from '../dicom/index.ts';
import { runDicomTask } from '../dicom/index.ts';
import type { BiometryFile, BiometryFileRead } from './biometry-file.ts';
import { BiometryFileError } from './biometry-file.ts';

const READ_TASK: DicomTask = {
  moduleUrl: new URL('./biometry-file.ts', import.meta.url),
  exportName: 'readBiometryFileTask',
  purpose: 'biometry',
};

/**
 * {@link readBiometryFile} of `bytes` (a Part 10 file whose structure was already checked), on a DICOM
 * thread. Throws a {@link BiometryFileError} for a file that cannot be filed as biometry, and a
 * `DicomError` when the reader fails otherwise (`decode-failed`) or the thread passes its limits.
 */
export async function readBiometryFileOnThread(bytes: Uint8Array, config: Config): Promise<BiometryFile> {
  const read = (await runDicomTask(READ_TASK, bytes, config)) as BiometryFileRead;
  if ('refusal' in read) throw new BiometryFileError(read.refusal);
  return read.file;
}
