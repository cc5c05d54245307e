/**
 * `sharp` (libvips), loaded on first use: the library and libvips take about 20 MB of a process that
 * never encodes an image. libvips's operation cache is turned off: it keeps the results of recent
 * operations (up to 50 MB) for reuse with the same input, and every image this service encodes is new.
 */
import type Sharp from 'sharp';

let loaded: Promise<typeof Sharp> | undefined;

/** The `sharp` function, with libvips's operation cache off. */
export function loadSharp(): Promise<typeof Sharp> {
  return (loaded ??= import('sharp').then(({ default: sharp }) => {
    sharp.cache(false);
    return sharp;
  }));
}
