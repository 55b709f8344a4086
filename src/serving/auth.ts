import { createHash, timingSafeEqual } from 'node:crypto';
import { isIP } from 'node:net';
import type { RequestHandler } from 'express';

/** Board settings from the configuration contract (`LEASEBEAT_BOARD_*`, `--insecure-board`). */
export interface BoardOptions {
  user?: string;
  password?: string;
  token?: string;
  /** Bull Board answers its write endpoints with 405. */
  readOnly?: boolean;
  /** Allow an unauthenticated board on a non-loopback address. */
  insecure?: boolean;
}

/** The credentials that protect the board, the status page and the status API. */
export interface Credentials {
  basic?: { user: string; password: string };
  token?: string;
}

/** How the board ends up protected; `warning` is set when it is deliberately left open. */
export interface BoardAccess {
  credentials: Credentials | undefined;
  warning?: string;
}

const IPV4_MAPPED_LOOPBACK = /^\[::ffff:7f[0-9a-f]{2}:[0-9a-f]{1,4}\]$/;

/** True for `localhost`, 127.0.0.0/8, `::1` and IPv4-mapped 127.0.0.0/8: addresses no other host can reach. */
export function isLoopbackHost(host: string): boolean {
  const bare = host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (bare === 'localhost') return true;
  switch (isIP(bare)) {
    case 4:
      return bare.startsWith('127.');
    case 6: {
      // The URL parser writes every spelling of an IPv6 address the same way (`0:0::1` becomes `[::1]`);
      // it does not take a zone (`%eth0`), which says nothing about loopback anyway.
      const canonical = new URL(`http://[${bare.replace(/%.*$/, '')}]/`).hostname;
      return canonical === '[::1]' || IPV4_MAPPED_LOOPBACK.test(canonical);
    }
    default:
      return false;
  }
}

/**
 * Checks the board options against the address the server binds. Throws when credentials are half set, or
 * when nothing protects a board reachable from other hosts and `insecure` was not given.
 */
export function resolveBoardAccess(board: BoardOptions, host: string): BoardAccess {
  // Empty environment variables count as unset.
  const user = board.user || undefined;
  const password = board.password || undefined;
  const token = board.token || undefined;
  if ((user === undefined) !== (password === undefined)) {
    throw new Error('LEASEBEAT_BOARD_USER and LEASEBEAT_BOARD_PASSWORD must be set together (basic auth)');
  }
  if (user !== undefined && user.includes(':')) {
    throw new Error('LEASEBEAT_BOARD_USER must not contain ":" (basic auth cannot carry it)');
  }
  if (user !== undefined || token !== undefined) {
    return {
      credentials: {
        ...(user !== undefined && password !== undefined ? { basic: { user, password } } : {}),
        ...(token !== undefined ? { token } : {}),
      },
    };
  }
  if (isLoopbackHost(host)) {
    return { credentials: undefined, warning: `Bull Board and the status page are unauthenticated on loopback address ${host}` };
  }
  if (board.insecure) {
    return {
      credentials: undefined,
      warning: `Bull Board and the status page are unauthenticated on ${host} (--insecure-board): anyone who reaches this port can change queues`,
    };
  }
  throw new Error(
    `Refusing to serve Bull Board without authentication on non-loopback address ${host}: set ` +
      'LEASEBEAT_BOARD_USER and LEASEBEAT_BOARD_PASSWORD (basic auth) or LEASEBEAT_BOARD_TOKEN (bearer token), ' +
      'bind LEASEBEAT_HTTP_HOST to a loopback address, or pass --insecure-board to serve it open',
  );
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value, 'utf8').digest();
}

/** Compares secrets in time independent of where they differ; hashing first hides their lengths too. */
function sameSecret(given: string, expected: Buffer): boolean {
  return timingSafeEqual(digest(given), expected);
}

/** Splits an Authorization header into its scheme (lower case) and parameter. */
function parseAuthorization(header: string | undefined): { scheme: string; value: string } | undefined {
  const match = header ? /^\s*(\S+)\s+(.*?)\s*$/.exec(header) : null;
  return match ? { scheme: match[1]!.toLowerCase(), value: match[2]! } : undefined;
}

/**
 * Middleware that lets a request through only with the configured basic credentials or bearer token, and
 * otherwise answers 401 with a challenge for each configured scheme (the Basic one makes browsers prompt).
 */
export function requireCredentials(credentials: Credentials): RequestHandler {
  const basic = credentials.basic && { user: digest(credentials.basic.user), password: digest(credentials.basic.password) };
  const token = credentials.token !== undefined ? digest(credentials.token) : undefined;
  const challenges = [
    ...(basic ? ['Basic realm="leasebeat", charset="UTF-8"'] : []),
    ...(token ? ['Bearer realm="leasebeat"'] : []),
  ];

  const accepts = (header: string | undefined): boolean => {
    const authorization = parseAuthorization(header);
    if (!authorization) return false;
    if (authorization.scheme === 'basic' && basic) {
      const decoded = Buffer.from(authorization.value, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon < 0) return false;
      // Both halves are always compared, so the timing does not tell which one was wrong.
      const userOk = sameSecret(decoded.slice(0, colon), basic.user);
      const passwordOk = sameSecret(decoded.slice(colon + 1), basic.password);
      return userOk && passwordOk;
    }
    if (authorization.scheme === 'bearer' && token) return sameSecret(authorization.value, token);
    return false;
  };

  return (req, res, next) => {
    if (accepts(req.headers.authorization)) {
      next();
      return;
    }
    res.setHeader('WWW-Authenticate', challenges);
    res.setHeader('Cache-Control', 'no-store');
    res.status(401).type('text/plain').send('authentication required\n');
  };
}
