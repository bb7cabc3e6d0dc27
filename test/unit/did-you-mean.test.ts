import { describe, expect, it } from 'vitest';
import { parseCommandArgs } from '../../src/cli/args.js';
import { BerthConfigSchema } from '../../src/config/berth-config.js';
import { knownKeysAt } from '../../src/config/schema-keys.js';
import { closestName, editDistance, SUGGEST_MAX_LENGTH } from '../../src/base/did-you-mean.js';

/** The one edit-distance helper every "did you mean" uses, and the argument reading around it. */
describe('editDistance', () => {
  it('counts insertions, deletions, substitutions and a swap of neighbours as one edit each', () => {
    expect([
      editDistance('project', 'project'),
      editDistance('projct', 'project'),
      editDistance('prjoect', 'project'),
      editDistance('anthropc', 'anthropic'),
      editDistance('warm_idle_secs', 'warm_idle_seconds'),
      editDistance('', 'abc'),
      editDistance('kitten', 'sitting'),
    ]).toEqual([0, 1, 1, 1, 3, 3, 3]);
  });
});

describe('closestName', () => {
  it('names the closest known name within a third of the typed length, ties to the first; nothing when none is close', () => {
    expect(closestName('projct', ['run', 'project', 'projects'])).toBe('project');
    expect(closestName('anthropc', ['openai', 'anthropic'])).toBe('anthropic');
    expect(closestName('Anthropic', ['anthropic'])).toBe('anthropic');
    expect(closestName('frob', ['show', 'list', 'create'])).toBeUndefined();
    expect(closestName('x', [])).toBeUndefined();
  });

  it('suggests nothing for input past its bound (the table is quadratic)', () => {
    const long = 'a'.repeat(SUGGEST_MAX_LENGTH + 1);
    expect(closestName(long, [`${long}b`])).toBeUndefined();
    expect(closestName('a'.repeat(100_000), ['a'])).toBeUndefined();
  });
});

describe('knownKeysAt', () => {
  it("finds an object's keys through defaults, records and unions: what berth.yaml offers at a path", () => {
    expect(knownKeysAt(BerthConfigSchema, ['runs'])).toContain('warm_idle_seconds');
    expect(knownKeysAt(BerthConfigSchema, [])).toEqual(expect.arrayContaining(['runs', 'models', 'bridges', 'images']));
    expect(knownKeysAt(BerthConfigSchema, ['projects', 'any'])).toEqual([
      'private_workspace',
      'shared_access',
      'honeytokens',
      'chat_forget',
    ]);
    expect(knownKeysAt(BerthConfigSchema, ['projects', 'any', 'shared_access', 0])).toEqual(['name', 'mode']);
    expect(knownKeysAt(BerthConfigSchema, ['nope'])).toEqual([]);
  });
});

describe('parseCommandArgs', () => {
  const options = { timeout: { type: 'string' as const }, rw: { type: 'boolean' as const } };
  it('reads a negative number as a value: a positional in its place, or the value of the option before it', () => {
    expect(parseCommandArgs(['runs.warm_idle_seconds', '-5'], options)).toEqual({
      values: {},
      positionals: ['runs.warm_idle_seconds', '-5'],
    });
    expect(parseCommandArgs(['-0.5', 'a', '--rw', '-1e3', 'b'], options)).toEqual({
      values: { rw: true },
      positionals: ['-0.5', 'a', '-1e3', 'b'],
    });
    expect(parseCommandArgs(['p', '--timeout', '-5'], options)).toEqual({ values: { timeout: '-5' }, positionals: ['p'] });
    expect(parseCommandArgs(['p', '--', '-5', '--rw'], options)).toEqual({ values: {}, positionals: ['p', '-5', '--rw'] });
  });

  it('still refuses what is not a number: an unknown option, a flag group', () => {
    expect(() => parseCommandArgs(['-5x'], options)).toThrow(expect.objectContaining({ code: 'ERR_PARSE_ARGS_UNKNOWN_OPTION' }));
    expect(() => parseCommandArgs(['--frob'], options)).toThrow(expect.objectContaining({ code: 'ERR_PARSE_ARGS_UNKNOWN_OPTION' }));
  });
});
