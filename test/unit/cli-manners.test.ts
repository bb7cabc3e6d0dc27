import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/berth.js';

/**
 * The first hour, round 4, step 6's deliberate mistakes: each answered in berth's shape
 * ("<CODE>: <one-line reason>", non-zero exit), naming what was probably meant, and saying the
 * value once. No engine is asked.
 */
const homes: string[] = [];
afterEach(() => {
  for (const h of homes.splice(0)) fs.rmSync(h, { recursive: true, force: true });
});
function home(yaml?: string) {
  const h = fs.mkdtempSync(join(os.tmpdir(), 'berth-cli-manners-'));
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
const times = (text: string, part: string) => text.split(part).length - 1;

describe('did you mean', () => {
  it('an unknown command names the closest one: "berth projct list"', async () => {
    const h = home();
    expect(await berth(h, 'projct', 'list')).toEqual({
      code: 64,
      out: '',
      err: 'USAGE: unknown command "projct list"; did you mean "berth project list"? (see "berth --help")\n',
    });
    expect((await berth(h, 'project', 'lst')).err).toMatch(
      /^USAGE: unknown command "project lst"; did you mean "berth project list"\? \("berth project --help" lists its commands: /,
    );
    expect((await berth(h, 'dmeo')).err).toBe('USAGE: unknown command "dmeo"; did you mean "berth demo"? (see "berth --help")\n');
    expect((await berth(h, 'frobnicate')).err).toBe('USAGE: unknown command "frobnicate" (see "berth --help")\n');
  });

  it("an unknown option names the command's closest one", async () => {
    const h = home();
    const r = await berth(h, 'project', 'create', 'x', '--isolaton');
    expect(r.code).toBe(64);
    expect(r.err).toMatch(
      /^USAGE: unknown option "--isolaton" for "berth project create"; did you mean "--isolation"\? \(usage: berth project create <name> /,
    );
    expect((await berth(h, '--hme', h, 'project', 'list')).err).toBe(
      'USAGE: unknown option "--hme"; did you mean "--home"? (see "berth --help")\n',
    );
    expect(fs.existsSync(join(h, 'projects/x'))).toBe(false);
  });

  it('a misspelt berth.yaml key names the closest key: "config set runs.warm_idle_secs 5"; nothing is written', async () => {
    const h = home();
    const file = join(h, 'berth.yaml');
    const r = await berth(h, 'config', 'set', 'runs.warm_idle_secs', '5');
    expect(r).toMatchObject({ code: 2, out: '' });
    expect(r.err).toBe(
      `CONFIG_INVALID: ${file} with this change would be invalid; nothing was written — runs.warm_idle_secs: unknown field; did you mean "warm_idle_seconds"?\n`,
    );
    expect(fs.existsSync(file)).toBe(false);
    // Reading one: the same suggestion, with the path named once.
    expect((await berth(h, 'config', 'get', 'runs.warm_idle_secs')).err).toBe(
      'CONFIG_INVALID: no such berth.yaml setting — runs.warm_idle_secs: did you mean "runs.warm_idle_seconds"? (see "berth config get")\n',
    );
    // A key the file itself holds is named the same way when berth loads it.
    fs.writeFileSync(file, 'runs:\n  warm_idle_secs: 5\n');
    expect((await berth(h, 'project', 'list')).err).toBe(
      `CONFIG_INVALID: ${file} is invalid — runs.warm_idle_secs: unknown field; did you mean "warm_idle_seconds"?\n`,
    );
  });

  it('a --model berth.yaml does not define names the closest, and says "anthropc" once', async () => {
    const none = home();
    const bare = await berth(none, 'project', 'create', 'x', '--model', 'anthropc');
    expect(bare.code).toBe(2);
    expect(bare.err).toBe(
      'CONFIG_INVALID: project settings is invalid — models.upstreams.0: model upstream "anthropc" is not one berth.yaml defines (berth.yaml defines no models yet; docs/agents.md adds one with its key)\n',
    );
    const h = home(
      'models:\n  anthropic: { api: anthropic, url: "http://127.0.0.1:18100", api_key: sk-ant-1 }\n  openai: { api: openai, url: "http://127.0.0.1:18101", api_key: sk-2 }\n',
    );
    const r = await berth(h, 'project', 'create', 'x', '--model', 'anthropc');
    expect(r.code).toBe(2);
    expect(r.err).toBe(
      'CONFIG_INVALID: project settings is invalid — models.upstreams.0: model upstream "anthropc" is not one berth.yaml defines; did you mean "anthropic"? (berth.yaml\'s models: anthropic, openai; docs/agents.md adds one with its key)\n',
    );
    expect(times(r.err, 'anthropc')).toBe(1);
    expect(fs.existsSync(join(h, 'projects/x'))).toBe(false);
  });
});

describe('a negative number after config set', () => {
  it('is the value: "config set runs.warm_idle_seconds -5" is refused by the setting\'s rule, not as an option; -- -5 says the same', async () => {
    const h = home();
    const file = join(h, 'berth.yaml');
    const expected = {
      code: 2,
      out: '',
      err: `CONFIG_INVALID: ${file} with this change would be invalid; nothing was written — runs.warm_idle_seconds: Too small: expected number to be >=0\n`,
    };
    expect(await berth(h, 'config', 'set', 'runs.warm_idle_seconds', '-5')).toEqual(expected);
    expect(await berth(h, 'config', 'set', 'runs.warm_idle_seconds', '--', '-5')).toEqual(expected);
    expect(fs.existsSync(file)).toBe(false);
    expect(await berth(h, 'config', 'set', 'egress.private_hosts', '[]')).toMatchObject({ code: 0 });
  });

  it('is an option\'s value too: "project update x --timeout -5" is judged as a timeout', async () => {
    const h = home();
    expect(await berth(h, 'project', 'create', 'x')).toMatchObject({ code: 0 });
    const r = await berth(h, 'project', 'update', 'x', '--timeout', '-5');
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/^CONFIG_INVALID: .*timeout/);
  });
});
