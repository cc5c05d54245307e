/**
 * The request headers a queued request keeps (its `HEADER_DATA` row), and the one list that decides them.
 *
 * An allow-list, not a list of credential headers to drop: a client can put a secret in any header of its
 * own choosing (`x-api-key`, `x-auth-token`, a vendor's signature header), and a stored payload is read
 * later by people who are not that client. Only headers that describe the transfer are kept: the body's
 * type, length and encoding, what the client accepts, the host, the user agent, the client's request id,
 * and the DICOM association's AE titles and id (C-STORE). `origin-ip-address` is set from the address the
 * server determined (the socket, or the first address a trusted proxy forwarded), never from a header.
 */

/** Header names (lower-case) stored with a queued request. */
export const STORED_REQUEST_HEADERS: ReadonlySet<string> = new Set([
  'accept',
  'accept-charset',
  'accept-encoding',
  'accept-language',
  'content-disposition',
  'content-encoding',
  'content-language',
  'content-length',
  'content-location',
  'content-type',
  'date',
  'expect',
  'host',
  'transfer-encoding',
  'user-agent',
  'x-request-id',
  'dicom-association-id',
  'dicom-called-ae-title',
  'dicom-calling-ae-title',
]);

/** The client address the server determined, added to the stored headers. */
export const ORIGIN_ADDRESS_HEADER = 'origin-ip-address';

type Headers = Readonly<Record<string, string | readonly string[] | undefined>>;

/**
 * The headers of `headers` on the allow-list, names lower-cased, plus `origin-ip-address` =
 * `clientAddress`: what a queued request stores as `HEADER_DATA`.
 */
export function storedRequestHeaders(
  headers: Headers,
  clientAddress: string,
): Record<string, string | readonly string[]> {
  const stored: Record<string, string | readonly string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (value !== undefined && STORED_REQUEST_HEADERS.has(lower)) stored[lower] = value;
  }
  stored[ORIGIN_ADDRESS_HEADER] = clientAddress;
  return stored;
}

/**
 * A stored `HEADER_DATA` object reduced to the allow-list and `origin-ip-address`, for showing rows
 * stored before the allow-list (they may hold credentials or any other header).
 */
export function keepStoredHeaders(stored: Readonly<Record<string, unknown>>): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(stored).filter(([name]) => {
      const lower = name.toLowerCase();
      return lower === ORIGIN_ADDRESS_HEADER || STORED_REQUEST_HEADERS.has(lower);
    }),
  );
}
