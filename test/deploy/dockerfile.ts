/** Reading a Dockerfile and its .dockerignore, for the offline checks of the image (no Docker engine here). */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Instruction {
  keyword: string;
  args: string;
}
export interface Stage {
  image: string;
  name: string | undefined;
  instructions: Instruction[];
}

/** Splits a Dockerfile into stages of instructions, joining `\` continuations and dropping comments. */
export function parseDockerfile(text: string): Stage[] {
  const logical = text
    .split('\n')
    .filter((line) => !/^\s*#/.test(line))
    .join('\n')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  const stages: Stage[] = [];
  for (const line of logical) {
    const [, keyword = '', args = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    const instruction = { keyword: keyword.toUpperCase(), args };
    if (instruction.keyword === 'FROM') {
      const [image = '', as, name] = args.split(/\s+/);
      stages.push({ image, name: as?.toUpperCase() === 'AS' ? name : undefined, instructions: [] });
    } else {
      assert.ok(stages.length > 0, `${keyword} before FROM`);
      stages[stages.length - 1]?.instructions.push(instruction);
    }
  }
  return stages;
}

/** The JSON array of an exec-form instruction; Docker silently runs invalid JSON through a shell instead. */
export function execForm(args: string): string[] {
  const parsed: unknown = JSON.parse(args);
  assert.ok(Array.isArray(parsed) && parsed.every((a): a is string => typeof a === 'string'), `not exec form: ${args}`);
  return parsed;
}

/** True when a `.dockerignore` pattern (without `**` or negation) excludes `path` or one of its parents. */
export function ignored(patterns: string[], path: string): boolean {
  const segments = path.replace(/^\.\//, '').split('/');
  return patterns.some((pattern) => {
    const regex = new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*')}$`);
    return segments.some((_, i) => regex.test(segments.slice(0, i + 1).join('/')));
  });
}

/** The patterns of `<dir>/.dockerignore`, without comments and blank lines. */
export function dockerignorePatterns(dir: string): string[] {
  return readFileSync(join(dir, '.dockerignore'), 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

/** The arguments of every `keyword` instruction of a stage. */
export const args = (stage: Stage, keyword: string): string[] =>
  stage.instructions.filter((i) => i.keyword === keyword).map((i) => i.args);
