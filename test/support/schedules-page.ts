import type { Browser, BrowserContext, Locator, Page, Request } from 'playwright-core';
import { startHttpServer, type HttpServerHandle } from '../../src/serving/http-server.js';
import { createMetrics } from '../../src/serving/metrics.js';
import type { InstanceSource } from '../../src/serving/sources.js';
import { launchChromium, watchPage } from './browser.js';

export const BOARD_USER = 'ops';
export const BOARD_PASSWORD = 's3cret pass';

/** A status page server on `source` and a Chromium that holds the board's basic credentials for it. */
export interface StatusBrowser {
  server: HttpServerHandle;
  browser: Browser;
  context: BrowserContext;
  page: Page;
  watched: ReturnType<typeof watchPage>;
  /** Another page with its own watch (a second server's page, say), closed with the rest. */
  newPage(): Promise<{ page: Page; watched: ReturnType<typeof watchPage> }>;
  close(): Promise<void>;
}

/** Starts the HTTP server on `source` behind basic auth (read-only with `readOnly`) and opens Chromium on it. */
export async function openStatusBrowser(source: InstanceSource, options: { readOnly?: boolean } = {}): Promise<StatusBrowser> {
  const server = await startHttpServer({
    host: '127.0.0.1',
    port: 0,
    source,
    metrics: createMetrics(),
    board: { user: BOARD_USER, password: BOARD_PASSWORD, readOnly: options.readOnly ?? false },
  });
  const browser = await launchChromium();
  const context = await browser.newContext({ httpCredentials: { username: BOARD_USER, password: BOARD_PASSWORD }, viewport: { width: 1600, height: 1000 } });
  const newPage = async (): Promise<{ page: Page; watched: ReturnType<typeof watchPage> }> => {
    const page = await context.newPage();
    return { page, watched: watchPage(page, server.url) };
  };
  const { page, watched } = await newPage();
  return {
    server,
    browser,
    context,
    page,
    watched,
    newPage,
    close: async () => {
      await browser.close();
      await server.close();
    },
  };
}

/** The browser's own 4xx/5xx lines for answers a test provoked on purpose: everything else is a problem. */
export function unexpected(problems: readonly string[], ...statuses: number[]): string[] {
  return problems.filter((problem) => !statuses.some((status) => problem.includes(`the server responded with a status of ${status}`)));
}

/** The Schedules section of a status page, as a user sees and drives it. */
export class SchedulesSection {
  /** Every request the page made to /api/schedules, in order. */
  readonly requests: Request[] = [];

  constructor(readonly page: Page) {
    page.on('request', (request) => {
      if (new URL(request.url()).pathname.startsWith('/api/schedules')) this.requests.push(request);
    });
  }

  get root(): Locator {
    return this.page.locator('#schedules');
  }

  get rows(): Locator {
    return this.page.locator('#schedules-table tr.schedule');
  }

  row(id: string): Locator {
    return this.page.locator(`#schedules-table tr.schedule[data-schedule="${id}"]`);
  }

  /** The ids of the rows on screen, in order. */
  ids(): Promise<string[]> {
    return this.rows.evaluateAll((nodes) => nodes.map((node) => (node as unknown as { getAttribute(name: string): string | null }).getAttribute('data-schedule') ?? ''));
  }

  /** Waits until the page on screen starts with `id` and has `count` rows. */
  async showing(first: string, count?: number): Promise<void> {
    await this.page.locator(`#schedules-table tbody tr.schedule:first-child[data-schedule="${first}"]`).waitFor();
    if (count !== undefined) await this.page.locator(`#schedules-table tbody tr.schedule:nth-child(${count}):last-child`).waitFor();
  }

  /** The list requests (not describe, not writes) made since request number `from`, as their query parameters. */
  listQueries(from = 0): URLSearchParams[] {
    return this.requests.slice(from).filter((r) => r.method() === 'GET' && new URL(r.url()).pathname === '/api/schedules').map((r) => new URL(r.url()).searchParams);
  }

  /** Opens the detail of `id` by clicking its row, and waits for its describe to show. */
  async open(id: string): Promise<Locator> {
    await this.row(id).click();
    const detail = this.page.locator('#schedule-detail');
    await detail.locator('#schedule-detail-title', { hasText: id }).waitFor();
    await detail.locator('#schedule-next').waitFor();
    return detail;
  }
}
