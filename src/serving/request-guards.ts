import type { IncomingHttpHeaders } from 'node:http';
import type { RequestHandler } from 'express';
import { isLoopbackHost } from './auth.js';

/** Methods that only read: every other method may change a queue and must come from our own pages. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The host part of a `Host` header or of an origin's authority (`example.com:8080` → `example.com`). */
export function hostnameOf(authority: string): string {
  const trimmed = authority.trim().toLowerCase();
  if (trimmed.startsWith('[')) return trimmed.slice(0, trimmed.indexOf(']') + 1);
  const colon = trimmed.lastIndexOf(':');
  return colon < 0 ? trimmed : trimmed.slice(0, colon);
}

/**
 * Why a mutating request must be refused as cross-site, or undefined when it may proceed.
 *
 * Browsers send `Sec-Fetch-Site` on every request (Chromium, Firefox, Safari since 2023) and `Origin` on
 * every non-GET one; a page cannot forge either. A request with neither comes from a non-browser client
 * (curl, the CLI), which no web page can drive, so it passes: credentials still apply to it.
 */
export function crossSiteRefusal(method: string, headers: IncomingHttpHeaders): string | undefined {
  if (SAFE_METHODS.has(method.toUpperCase())) return undefined;
  const site = headers['sec-fetch-site'];
  if (typeof site === 'string') {
    // `same-site` is not enough: another port on localhost is the same site (a dev server, a notebook).
    // `none` is a request the user started (a bookmark, the address bar), never one a page made.
    return site === 'same-origin' || site === 'none' ? undefined : `Sec-Fetch-Site is ${site}`;
  }
  const origin = headers.origin;
  if (origin === undefined) return undefined;
  let originHost: string;
  try {
    originHost = new URL(origin).host;
  } catch {
    // `Origin: null` (sandboxed frames, file: pages, some redirects) is never our own page.
    return `Origin ${origin} is opaque`;
  }
  // Only the authority is compared: behind a TLS-terminating proxy the scheme differs, the host does not.
  return originHost.toLowerCase() === (headers.host ?? '').trim().toLowerCase() ? undefined : `Origin ${origin} is another site`;
}

/**
 * Refuses (403) any mutating request a browser made from another origin: a cross-site form post (even
 * `text/plain`, which needs no CORS preflight) or a fetch from another page. Basic credentials cached by the
 * browser would otherwise ride along with it.
 */
export function requireSameOrigin(onRefused?: (reason: string) => void): RequestHandler {
  return (req, res, next) => {
    const refusal = crossSiteRefusal(req.method, req.headers);
    if (refusal === undefined) {
      next();
      return;
    }
    onRefused?.(refusal);
    res.setHeader('Cache-Control', 'no-store');
    res.status(403).type('text/plain').send(`cross-site request refused (${refusal})\n`);
  };
}

/**
 * On a loopback bind, refuses (421) requests whose `Host` is not a loopback name: that is how a DNS
 * rebinding page (evil.example resolving to 127.0.0.1) reaches the port, and its Host still says
 * evil.example. `allowedHosts` adds names a local proxy may use. Non-loopback binds need credentials
 * anyway, so they accept any Host.
 */
export function requireLoopbackHost(bindHost: string, allowedHosts: readonly string[] = []): RequestHandler {
  const allowed = new Set(allowedHosts.map((host) => hostnameOf(host)));
  const bypass = !isLoopbackHost(bindHost);
  return (req, res, next) => {
    const host = req.headers.host;
    if (bypass || (host !== undefined && (isLoopbackHost(hostnameOf(host)) || allowed.has(hostnameOf(host))))) {
      next();
      return;
    }
    res.setHeader('Cache-Control', 'no-store');
    res
      .status(421)
      .type('text/plain')
      .send(`this server is bound to loopback and answers only to loopback names, not Host ${host ?? '(none)'}; a proxy that keeps the Host header needs that name in the allowed hosts\n`);
  };
}
