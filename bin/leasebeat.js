#!/usr/bin/env node
// Runs the TypeScript CLI through tsx, which also lets jobs/*.ts load at run time.
import { register } from 'tsx/esm/api';
register();
await import('../src/cli/main.ts');
