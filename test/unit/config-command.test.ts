import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/berth.js';
import { parseConfigPath } from '../../src/config/operator-edits.js';

/** `berth config get|set|unset` on a home of its own (no engine is asked). */
const homes: string[] = [];
afterEach(() => {
  for (const h of homes.splice(0)) fs.rmSync(h, { recursive: true, force: true });
});
function home(yaml?: string) {
  const h = fs.mkdtempSync(join(os.tmpdir(), 'berth-config-cmd-'));
  homes.push(h);
  if (yaml !== undefined) fs.writeFileSync(join(h, 'berth.yaml'), yaml);
  return h;
}
async function berth(h: string, ...args: string[]) {
  let out = '';
  let err = '';
  const code = await main(['--home', h, ...args], {}, { out: (s) => void (out += s), err: (s) => void (err += s) });
  return { code, out, err };
}

describe('berth config', () => {
  it('set writes one setting, keeps the comments, and the next reader sees it; get shows it', async () => {
    const h = home('# my settings\nruns:\n  warm_idle_seconds: 30 # short\n');
    expect(await berth(h, 'config', 'set', 'bridges.signal.url', 'http://127.0.0.1:8081')).toMatchObject({
      code: 2,
      err: expect.stringMatching(/^CONFIG_INVALID: /),
    }); // no account yet: refused whole
    expect(await berth(h, 'config', 'set', 'bridges.signal', '{ url: "http://127.0.0.1:8081", account: "+4915550000" }')).toMatchObject({
      code: 0,
      out: 'set bridges.signal\n',
    });
    expect(await berth(h, 'config', 'set', 'routes.signal', '{ project: helper }')).toMatchObject({ code: 0 });
    expect(await berth(h, 'config', 'set', 'runs.warm_idle_seconds', '45')).toMatchObject({ code: 0 });
    const text = fs.readFileSync(join(h, 'berth.yaml'), 'utf8');
    expect(text).toContain('# my settings');
    expect(text).toContain('warm_idle_seconds: 45 # short');
    expect((await berth(h, 'config', 'get', 'bridges.signal.account')).out).toBe('"+4915550000"\n');
    expect((await berth(h, 'config', 'get', 'runs.warm_idle_seconds')).out).toBe('45\n');
    expect((await berth(h, 'config', 'get', 'bridges.signal')).out).toContain('senders: pairing'); // the default, filled in
    // Audited as the operator's other berth.yaml edits are: the refused one too.
    const audit = fs
      .readFileSync(join(h, '.berth/audit.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { action: string; target?: string; outcome: string });
    expect(audit.filter((e) => e.action === 'config.set').map((e) => [e.target, e.outcome])).toEqual([
      ['bridges.signal.url', 'refused'],
      ['bridges.signal', 'ok'],
      ['routes.signal', 'ok'],
      ['runs.warm_idle_seconds', 'ok'],
    ]);
  });

  it('a bad value changes nothing and names the field; unset brings the default back', async () => {
    const h = home('runs:\n  warm_idle_seconds: 30\n');
    const before = fs.readFileSync(join(h, 'berth.yaml'), 'utf8');
    const bad = await berth(h, 'config', 'set', 'runs.warm_idle_seconds', 'soon');
    expect(bad.code).not.toBe(0);
    expect(bad.err).toMatch(/^CONFIG_INVALID: .*runs\.warm_idle_seconds/);
    expect(fs.readFileSync(join(h, 'berth.yaml'), 'utf8')).toBe(before);
    expect(await berth(h, 'config', 'unset', 'runs.warm_idle_seconds')).toMatchObject({ code: 0 });
    expect((await berth(h, 'config', 'get', 'runs.warm_idle_seconds')).out).not.toBe('30\n');
    expect(await berth(h, 'config', 'unset', 'runs.warm_idle_seconds')).toMatchObject({
      code: 2,
      err: 'CONFIG_INVALID: nothing to unset — runs.warm_idle_seconds: not set in berth.yaml\n',
    });
  });

  it('secrets are never printed', async () => {
    const h = home();
    expect(
      await berth(
        h,
        'config',
        'set',
        'models.anthropic',
        '{ api: anthropic, url: "https://api.anthropic.com", api_key: sk-ant-secret-123 }',
      ),
    ).toMatchObject({ code: 0 });
    const all = await berth(h, 'config', 'get');
    expect(all.out).toContain('api_key: (set)');
    expect(all.out).not.toContain('sk-ant-secret-123');
    expect((await berth(h, 'config', 'get', 'models.anthropic.api_key')).out).toBe('(set)\n');
  });

  it('paths: dotted keys, bounded, never a prototype', () => {
    expect(parseConfigPath('channels.signal:+4915550000.project')).toEqual(['channels', 'signal:+4915550000', 'project']);
    for (const bad of ['a..b', '.a', 'a.', '__proto__.x', 'a.constructor', 'a b', Array(10).fill('k').join('.')])
      expect(() => parseConfigPath(bad)).toThrow(/is not a berth\.yaml path/);
  });
});
