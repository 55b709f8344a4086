import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';

/** Debian's Chromium, which CI installs (.ci/run); playwright-core drives it, it downloads no browser. */
export const CHROMIUM = '/usr/bin/chromium';

/** Headless Chromium with nothing that talks to the network on its own (so any request seen is the page's). */
export async function launchChromium(): Promise<Browser> {
  // Fail, never skip: a missing browser must not pass silently.
  assert.ok(existsSync(CHROMIUM), `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)`);
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

/**
 * Collects what must never happen on our pages: script errors, console errors (CSP violations are console
 * errors), dialogs (an XSS probe would open one), and any request that leaves `allowedOrigin`.
 */
export function watchPage(page: Page, allowedOrigin: string): { problems: string[]; external: string[] } {
  const problems: string[] = [];
  const external: string[] = [];
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  page.on('dialog', (dialog) => {
    problems.push(`dialog opened: ${dialog.message()}`);
    void dialog.dismiss();
  });
  page.on('console', (message) => {
    // Chromium asks every origin for /favicon.ico on its own; its 401/404 is not the page's doing.
    if (message.type() === 'error' && !message.text().includes('favicon')) problems.push(`console: ${message.text()}`);
  });
  page.on('request', (request) => {
    const url = request.url();
    if (!url.startsWith(allowedOrigin) && !url.startsWith('data:')) external.push(url);
  });
  return { problems, external };
}

/** Saves a full-page screenshot under test-results/ (kept as a CI artefact) and returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  const path = fileURLToPath(new URL(`../../test-results/${name}.png`, import.meta.url));
  await mkdir(dirname(path), { recursive: true });
  await page.screenshot({ path, fullPage: true });
  return path;
}
