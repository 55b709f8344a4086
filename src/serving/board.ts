import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Queue } from 'bullmq';
import type { Express, RequestHandler } from 'express';

/** Where Bull Board is mounted; its job pages live at `${BOARD_PATH}/queue/<queue>/<jobId>`. */
export const BOARD_PATH = '/admin/queues';

/** Bull Board over a set of queues that may change while the process runs (hot-reloaded jobs). */
export interface Board {
  router: Express;
  /** Middleware that hands the board the current queues before it answers. */
  sync: RequestHandler;
}

/**
 * The Content-Security-Policy of Bull Board's pages: its own scripts, images and API only, no framing.
 * Styles may be inline: its template and its bundled editor (CodeMirror) inject `<style>` elements with no
 * way to hand them a nonce, and a style cannot run script; what matters (no inline or foreign script, no
 * foreign connection, no framing) stays strict.
 */
export const BOARD_POLICY = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "manifest-src 'self'",
  // The template sets `<base href="/admin/queues/">`.
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** An external `<link>` (Bull Board 9.x loads IBM Plex from Google Fonts): dropped, the page falls back to system fonts. */
const EXTERNAL_LINK = /<link\b[^>]*\bhref\s*=\s*["']?(?:https?:)?\/\/[^>]*>\s*/gi;

/** Bull Board's rendered page made self-contained: no request leaves this server. */
export function hardenBoardHtml(html: string): string {
  return html.replace(EXTERNAL_LINK, '');
}

type RenderEngine = (path: string, options: object, callback: (error: Error | null, html?: string) => void) => void;

/** Creates Bull Board at `BOARD_PATH` for the queues `queues()` returns at each request. */
export function createBoard(options: { queues: () => Queue[]; readOnly: boolean; title: string }): Board {
  const adapt = (queue: Queue): BullMQAdapter => new BullMQAdapter(queue, { readOnlyMode: options.readOnly });
  const serverAdapter = new ExpressAdapter();
  serverAdapter.setBasePath(BOARD_PATH);
  let shown = options.queues();
  const { replaceQueues } = createBullBoard({
    queues: shown.map(adapt),
    serverAdapter,
    options: {
      uiConfig: {
        boardTitle: options.title,
        miscLinks: [{ text: 'leasebeat status', url: '/' }],
        // The worker list runs CLIENT LIST on every poll, which managed Redis often forbids.
        showWorkers: false,
      },
    },
  });

  const sync: RequestHandler = (_req, res, next) => {
    const current = options.queues();
    const changed = current.length !== shown.length || current.some((queue, index) => queue !== shown[index]);
    if (changed) {
      replaceQueues(current.map(adapt));
      shown = current;
    }
    // Every board response, HTML or JSON, refuses to be framed (clickjacking of its buttons).
    res.setHeader('Content-Security-Policy', BOARD_POLICY);
    res.setHeader('X-Frame-Options', 'DENY');
    next();
  };
  const router = serverAdapter.getRouter() as Express;
  router.disable('x-powered-by');
  // Wrap the template engine the adapter registered, so the page is rewritten whatever its template says.
  const engines = (router as unknown as { engines: Record<string, RenderEngine | undefined> }).engines;
  const render = engines['.ejs'];
  if (!render) throw new Error('Bull Board registered no ejs engine: its adapter changed, review hardenBoardHtml');
  router.engine('ejs', (path: string, locals: object, callback: (error: Error | null, html?: string) => void) => {
    render(path, locals, (error, html) => {
      if (error || html === undefined) callback(error ?? new Error('Bull Board rendered no page'));
      else callback(null, hardenBoardHtml(html));
    });
  });
  return { router, sync };
}
