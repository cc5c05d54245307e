/**
 * Transport security (Basic credentials must not travel over plain HTTP): which requests count as HTTPS, the
 * security headers every response carries, and the Fastify `https` option when the server terminates TLS
 * itself.
 *
 * A request is HTTPS when its socket is TLS, or when the socket's peer is a trusted proxy
 * (`TRUSTED_PROXIES`, Fastify's `trustProxy`) that says `X-Forwarded-Proto: https`. Fastify's
 * `request.protocol` already applies exactly that rule (it reads the header only when the direct peer
 * passes the trust function), so this module relies on it.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * `false` lets a route (e.g. an HTML documentation page) go without the API's restrictive
     * `Content-Security-Policy`; a route may also set its own header, which is never overwritten.
     */
    csp?: boolean;
  }
}

export const HSTS = 'max-age=31536000; includeSubDomains';
/** Nothing may load from an API response, and no page may frame it. */
export const API_CSP = "default-src 'none'; frame-ancestors 'none'";

/** True when the request reached us over TLS, directly or through a trusted proxy that terminated it. */
export function isHttpsRequest(request: FastifyRequest): boolean {
  return request.protocol === 'https';
}

/**
 * True when the request carries Basic (or any) credentials over plain HTTP while `REQUIRE_TLS` is on:
 * the guard then refuses it before any password check.
 */
export function presentsCredentialsInsecurely(config: Config, request: FastifyRequest): boolean {
  return config.requireTls && request.headers.authorization !== undefined && !isHttpsRequest(request);
}

/**
 * Sets the security headers of every response (called from the app's onSend hook). `Cache-Control` stays
 * with the app hook, which leaves a route's own value alone (attachments).
 */
export function applySecurityHeaders(request: FastifyRequest, reply: FastifyReply): void {
  void reply.header('x-content-type-options', 'nosniff');
  void reply.header('x-frame-options', 'DENY');
  void reply.header('referrer-policy', 'no-referrer');
  if (request.routeOptions.config?.csp !== false && !reply.hasHeader('content-security-policy')) {
    void reply.header('content-security-policy', API_CSP);
  }
  if (isHttpsRequest(request)) void reply.header('strict-transport-security', HSTS);
}

/** The Fastify `https` server option when TLS_CERT/TLS_KEY are set (PEM already read and checked). */
export function httpsServerOptions(config: Config): { https: { cert: Buffer; key: Buffer } } | undefined {
  return config.tls === undefined ? undefined : { https: { cert: config.tls.cert, key: config.tls.key } };
}
