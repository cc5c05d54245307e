/**
 * Words shared by the endpoints that take multipart bodies (queue add, attachment create), so that one
 * fault reads the same on both.
 */

/** The 422 `data` message of a multipart body that cannot be read (no boundary, cut short, bad framing). */
export const MALFORMED_MULTIPART_MESSAGE = 'Malformed multipart body.';
