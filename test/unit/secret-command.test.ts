import fs from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/berth.js';

/** `berth secret ...` on a home of its own (no engine is asked): bad input is a clear error that changes nothing, and no value is ever printed. */
const homes: string[] = [];
afterEach(() => {
  for (const h of homes.splice(0)) fs.rmSync(h, { recursive: true, force: true });
});
function home(): string {
  const h = fs.mkdtempSync(join(os.tmpdir(), 'berth-secret-cmd-'));
  homes.push(h);
  return h;
}
async function berth(h: string, ...args: string[]) {
  let out = '';
  let err = '';
  const code = await main(['--home', h, ...args], { ACME: 'env-value-1234' }, { out: (s) => void (out += s), err: (s) => void (err += s) });
  return { code, out, err };
}
const yamlOf = (h: string) => (fs.existsSync(join(h, 'berth.yaml')) ? fs.readFileSync(join(h, 'berth.yaml'), 'utf8') : '');

describe('berth secret', () => {
  it('refuses what it cannot use, by code and field, and writes nothing', async () => {
    const h = home();
    const loose = join(h, 'loose');
    fs.writeFileSync(loose, 'tok-loose-123\n', { mode: 0o644 });
    expect(await berth(h, 'secret', 'set', 'GH_TOKEN', '--from-file', join(h, 'missing'))).toMatchObject({
      code: 31,
      err: expect.stringMatching(/^SECRET_UNAVAILABLE: secret GH_TOKEN: its file .* cannot be read \(ENOENT\)/),
    });
    expect(await berth(h, 'secret', 'set', 'GH_TOKEN', '--from-file', loose)).toMatchObject({
      code: 31,
      err: expect.stringContaining('may be read by others (mode 644)'),
    });
    expect(await berth(h, 'secret', 'set', 'PATH', '--from-env', 'ACME')).toMatchObject({
      code: 64,
      err: expect.stringMatching(/^USAGE: secret name "PATH" is a variable berth or the container sets itself/),
    });
    expect(await berth(h, 'secret', 'set', 'GH_TOKEN')).toMatchObject({ code: 64 });
    expect(await berth(h, 'secret', 'grant', 'GH_TOKEN', '--project', 'p', '--host', 'x.example')).toMatchObject({
      code: 23,
      err: expect.stringMatching(/^NOT_FOUND: berth keeps no secret GH_TOKEN/),
    });
    expect(yamlOf(h)).not.toContain('GH_TOKEN');
    expect(await berth(h, 'secret', 'set', 'API_TOKEN', '--from-env', 'ACME')).toMatchObject({ code: 0 });
    expect(await berth(h, 'secret', 'grant', 'API_TOKEN', '--project', 'nope', '--host', 'x.example')).toMatchObject({
      code: 3,
      err: expect.stringMatching(/^PROJECT_NOT_FOUND/),
    });
    expect(await berth(h, 'secret', 'revoke', 'API_TOKEN', '--project', 'nope')).toMatchObject({ code: 23 });
  });

  it('lists where values come from and never a value; rm removes what berth stored itself', async () => {
    const h = home();
    expect(await berth(h, 'secret', 'set', 'API_TOKEN', '--from-env', 'ACME')).toMatchObject({ code: 0 });
    expect(await berth(h, 'secret', 'set', 'CMD_TOKEN', '--from-command', 'printf cmd-value-5678')).toMatchObject({ code: 0 });
    const list = await berth(h, 'secret', 'list');
    expect(list.out).toContain("API_TOKEN  from berth's environment $ACME  readable");
    expect(list.out).toContain('CMD_TOKEN  from command ["printf","cmd-value-5678"]  readable');
    expect(list.out).not.toContain('env-value-1234');
    expect(yamlOf(h)).not.toContain('env-value-1234');
    expect(await berth(h, 'secret', 'rm', 'API_TOKEN')).toMatchObject({ code: 0, out: 'removed API_TOKEN\n' });
    expect(yamlOf(h)).not.toContain('API_TOKEN');
  });
});
