#!/usr/bin/env node
// Runs the CLI through tsx, which also lets jobs/*.ts load at run time: from the TypeScript sources in a
// checkout, or from the compiled dist/ in a built image.
import { existsSync } from 'node:fs';
import { register } from 'tsx/esm/api';

register();
const fromSource = new URL('../src/cli/main.ts', import.meta.url);
await import(existsSync(fromSource) ? fromSource.href : new URL('../dist/cli/main.js', import.meta.url).href);
