import fs from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listTree, sha256, testHome, type TestHome } from '../helpers.js';

/** Every way to change a path; each line prints ok:<op> or fail:<op>. */
function attacks(file: string, dir: string, dirChild: string, reset = ''): string {
  const ops: Array<[string, string]> = [
    ['write', `echo evil > ${file}`],
    ['append', `echo evil >> ${file}`],
    ['truncate', `: > ${file}`],
    ['delete', `rm -f ${file}`],
    ['rename', `mv ${file} ${file}.moved`],
    ['chmod', `chmod 666 ${file}`],
    ['hardlink', `ln ${file} ${file}.hl && echo evil > ${file}.hl`],
    ['touch', `touch -d 2000-01-01 ${file}`],
    ['dir-create', `echo evil > ${dir}/new-file`],
    ['dir-delete', `rm -f ${dir}/${dirChild}`],
    ['dir-overwrite', `echo evil > ${dir}/${dirChild}`],
    ['dir-rename', `mv ${dir} ${dir}.moved`],
    ['dir-chmod', `chmod 777 ${dir}`],
    ['dir-mkdir', `mkdir ${dir}/sub`],
    ['dir-hardlink', `ln ${dir}/${dirChild} ${dir}-hl && echo evil > ${dir}-hl`],
  ];
  return ops.map(([name, cmd]) => `${reset}if (${cmd}) 2>/dev/null; then echo ok:${name}; else echo fail:${name}; fi`).join('\n');
}

const OPS = [
  'write',
  'append',
  'truncate',
  'delete',
  'rename',
  'chmod',
  'hardlink',
  'touch',
  'dir-create',
  'dir-delete',
  'dir-overwrite',
  'dir-rename',
  'dir-chmod',
  'dir-mkdir',
  'dir-hardlink',
];

function fileHashes(dir: string): Record<string, string> {
  return Object.fromEntries(
    listTree(dir)
      .filter((f) => fs.lstatSync(join(dir, f)).isFile())
      .map((f) => [f, sha256(join(dir, f))]),
  );
}

function results(stdout: string): Record<string, string> {
  return Object.fromEntries(
    stdout
      .split('\n')
      .filter((l) => /^(ok|fail):/.test(l))
      .map((l) => l.split(':').reverse() as [string, string]),
  );
}

let h: TestHome;
beforeAll(() => {
  h = testHome();
});
afterAll(async () => {
  await h[Symbol.asyncDispose]();
});

describe.each([
  { mode: 'isolation on', isolation: true },
  { mode: 'isolation off', isolation: false },
])('protected paths, $mode (real containers)', ({ isolation }) => {
  const name = isolation ? 'prot-on' : 'prot-off';
  const root = isolation ? '/workspace' : '/workspace';

  it('every write, truncate, delete, rename, chmod and hardlink fails, and the host files are unchanged', async () => {
    h.create({ name, workspace_isolation: isolation, protected_paths: ['AGENTS.md', '.factory/'] });
    const p = h.berth.store.get(name);
    const snapDir = join(p.paths.protectedDir, p.snapshot?.generation ?? 'missing');
    const before = fileHashes(snapDir);
    const projectBefore = sha256(join(p.paths.dir, 'AGENTS.md'));

    const o = await h.run(name, 'web:mallory', `cd ${root}\n${attacks('AGENTS.md', '.factory', 'mcp.json')}\ncat AGENTS.md`);
    expect(results(o.stdout)).toEqual(Object.fromEntries(OPS.map((op) => [op, 'fail'])));
    expect(o.stdout).toContain(`# ${name}`);

    const after = fileHashes(snapDir);
    expect(after).toEqual(before);
    expect(Object.keys(after).sort()).toEqual(['.factory/mcp.json', '.factory/settings.json', 'AGENTS.md']);
    expect(sha256(join(p.paths.dir, 'AGENTS.md'))).toBe(projectBefore);
  });

  it('control: the same operations succeed on paths that are not protected (the read-only mount is the reason)', async () => {
    const o = await h.run(
      name,
      'web:mallory',
      `cd ${root}\n${attacks('free.md', 'free', 'mcp.json', 'rm -rf free* ; echo hi > free.md; mkdir free; echo hi > free/mcp.json; ')}`,
    );
    expect(results(o.stdout)).toEqual(Object.fromEntries(OPS.map((op) => [op, 'ok'])));
  });
});
