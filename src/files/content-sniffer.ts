/**
 * The one content sniffer: the media type that a file's leading bytes prove, by the magic numbers of
 * `file-type`. Used wherever the service must know what bytes are rather than what a client says
 * (attachment create, queue file parts, thumbnail types). It identifies, it does not validate: a
 * truncated PNG still sniffs as `image/png`, so callers that need a complete image (sign/add) check the
 * structure themselves.
 */
import type * as FileType from 'file-type';

// file-type and its readers are loaded on the first sniff, not with the server (several MB).
let fileType: Promise<typeof FileType> | undefined;

// Every signature file-type knows lies within its first few KiB; a bounded prefix keeps the cost of
// sniffing a 100 MiB upload the same as a small one.
const SNIFF_WINDOW_BYTES = 64 * 1024;
const PDF_HEADER = Buffer.from('%PDF-', 'latin1');
// Readers accept a PDF header anywhere in the first 1024 bytes (PDF 32000-1, annex H.3 note 3), where
// file-type looks at offset 0 only.
const PDF_HEADER_WINDOW_BYTES = 1024;

// APNG is a PNG that every PNG reader shows (its first frame): one type for both.
const ALIASES: Readonly<Record<string, string>> = { 'image/apng': 'image/png' };

/** The media type (`type/subtype`, lower case) that the bytes prove, or undefined when none. */
export async function sniffContentType(bytes: Uint8Array): Promise<string | undefined> {
  const head = bytes.subarray(0, SNIFF_WINDOW_BYTES);
  const { fileTypeFromBuffer } = await (fileType ??= import('file-type'));
  let mime: string | undefined;
  try {
    mime = (await fileTypeFromBuffer(head))?.mime;
  } catch {
    // A structure cut short inside the window: file-type proves nothing about it.
    mime = undefined;
  }
  if (mime === undefined && Buffer.from(head.subarray(0, PDF_HEADER_WINDOW_BYTES)).includes(PDF_HEADER))
    return 'application/pdf';
  return mime === undefined ? undefined : (ALIASES[mime] ?? mime);
}
