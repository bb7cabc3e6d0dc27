import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isBerthError } from '../../src/base/errors.js';
import {
  checkpointBounds,
  checkpointId,
  CheckpointIdSchema,
  prunePlan,
  restoreDrops,
  totalBytes,
  withoutCheckpoint,
  type CheckpointMeta,
} from '../../src/plan/checkpoints.js';
import { listCheckpoints, restoreCheckpoint, takeCheckpoint, type CheckpointSource } from '../../src/store/checkpoints.js';
import type { Project } from '../../src/store/projects.js';
import type { Manifest } from '../../src/fs/checkpoint-manifest.js';

/** Checkpoints: the pure bookkeeping (who owns which bytes, what is pruned), then the copies on a real filesystem. */
const dirs: string[] = [];
const closers: Array<() => void> = [];
afterEach(() => {
  for (const c of closers.splice(0)) c();
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});
const tmp = () => {
  const d = fs.mkdtempSync(join(os.tmpdir(), 'berth-checkpoints-'));
  dirs.push(d);
  return d;
};

const meta = (id: string, over: Partial<CheckpointMeta> = {}): CheckpointMeta => ({
  id,
  session: 's',
  workspace_id: 'w',
  created_at: '2026-11-28T00:00:00.000Z',
  started_ns: '0',
  owned_bytes: 100,
  linked_bytes: 0,
  files: 1,
  skipped: 0,
  ms: 1,
  ...over,
});
const ID = (n: number) => `20261128T0000000${String(n).padStart(2, '0')}Z-00000${n % 10}`;

describe('checkpoint bookkeeping (plan/checkpoints.ts)', () => {
  it('ids sort by time and are checked', () => {
    const a = checkpointId(new Date('2026-11-28T01:02:03.004Z'), 'abcdef12');
    expect(a).toBe('20261128T010203004Z-abcdef');
    expect(CheckpointIdSchema.safeParse(a).success).toBe(true);
    expect(CheckpointIdSchema.safeParse('../etc').success).toBe(false);
    expect(checkpointId(new Date('2026-11-28T01:02:03.005Z'), '000000') > a).toBe(true);
  });

  it('dropping the oldest hands its successor the bytes they shared; dropping the newest frees its own', () => {
    const list = [
      meta(ID(1)),
      meta(ID(2), { base: ID(1), owned_bytes: 10, linked_bytes: 90 }),
      meta(ID(3), { base: ID(2), owned_bytes: 5, linked_bytes: 95 }),
    ];
    expect(totalBytes(list)).toBe(115);
    const after = withoutCheckpoint(list, ID(1));
    expect(after.map((c) => [c.id, c.owned_bytes, c.linked_bytes, c.base])).toEqual([
      [ID(2), 100, 0, undefined],
      [ID(3), 5, 95, ID(2)],
    ]);
    expect(totalBytes(withoutCheckpoint(list, ID(3)))).toBe(110);
  });

  it('prunes oldest first to the count and the bytes; one alone over the bytes is not kept', () => {
    const list = [1, 2, 3, 4].map((n) => meta(ID(n)));
    expect(prunePlan(list, { keep: 2, bytes: 1e9 }).drop).toEqual([ID(1), ID(2)]);
    expect(prunePlan(list, { keep: 10, bytes: 250 }).drop).toEqual([ID(1), ID(2)]);
    expect(prunePlan([meta(ID(1), { owned_bytes: 500 })], { keep: 10, bytes: 250 }).drop).toEqual([ID(1)]);
    expect(prunePlan(list, { keep: 0, bytes: 1e9 }).kept).toEqual([]);
  });

  it("a restore uses up its checkpoint and the session's newer ones, newest first; another session's stay", () => {
    const list = [meta(ID(1)), meta(ID(2), { session: 'other' }), meta(ID(3)), meta(ID(4))];
    expect(restoreDrops(list, 's', ID(3))).toEqual([ID(4), ID(3)]);
    expect(restoreDrops(list, 's', ID(2))).toEqual([]); // not this session's
  });

  it("the bytes are the project's quota at most", () => {
    expect(checkpointBounds({ keep: 3, max_mb: 1024, max_files: 9 }, 100)).toEqual({ keep: 3, bytes: 100 * 1048576, files: 9 });
  });
});

/** A project whose state is a temporary directory: what the checkpoint store reads of it. */
function rig() {
  const root = tmp();
  const project = { paths: { stateDir: join(root, 'state') }, metadata: { name: 'p' } } as unknown as Project;
  const workspace = { id: 'w1', dir: join(root, 'ws') };
  const home = join(root, 'home');
  fs.mkdirSync(workspace.dir);
  fs.mkdirSync(home);
  const src: CheckpointSource = { project, tenantKey: 'web:alice', session: 's1', workspace, home };
  return { root, project, src, ws: workspace.dir, home };
}
const BOUNDS = { keep: 10, bytes: 1 << 30, files: 10_000 };
const cpDir = (r: ReturnType<typeof rig>, id: string) => {
  const tenants = fs.readdirSync(join(r.project.paths.stateDir, 'checkpoints'));
  return join(r.project.paths.stateDir, 'checkpoints', tenants[0] as string, id);
};
/** A checkpoint's record of one path of its workspace, and where a file's bytes are (its object). */
const saved = (r: ReturnType<typeof rig>, id: string, path: string) => {
  const m = JSON.parse(fs.readFileSync(join(cpDir(r, id), 'manifest.json'), 'utf8')) as Manifest;
  const e = m.workspace.entries.find((x) => x.p === path);
  if (!e) throw new Error(`${path} is not in checkpoint ${id}`);
  return { ...e, object: e.y === 'f' ? join(cpDir(r, id), '..', '.objects', e.o) : '' };
};
/** Checkpoints compare times with the clock: a file must be older than the racy window to be linked. */
const age = (path: string) => fs.utimesSync(path, new Date(Date.now() - 60_000), new Date(Date.now() - 60_000));

describe('checkpoint copies on a real filesystem (store/checkpoints.ts)', () => {
  it('keeps exact bytes; /undo puts back the workspace and the home, and removes what came after', () => {
    const r = rig();
    fs.writeFileSync(join(r.ws, 'a.txt'), 'one\n');
    fs.mkdirSync(join(r.ws, 'sub'));
    fs.writeFileSync(join(r.ws, 'sub', 'b.bin'), Buffer.from([0, 1, 2, 255]));
    fs.writeFileSync(join(r.home, 'conversation.jsonl'), '{"turn":1}\n');
    const c = takeCheckpoint(r.src, BOUNDS, { message: 'write  the\nfile' });
    expect(c.message).toBe('write the file');
    fs.writeFileSync(join(r.ws, 'a.txt'), 'two\n'); // in place: the checkpoint's copy must not change
    fs.writeFileSync(join(r.ws, 'new.txt'), 'later');
    fs.appendFileSync(join(r.home, 'conversation.jsonl'), '{"turn":2}\n');
    expect(fs.readFileSync(saved(r, c.id, 'a.txt').object, 'utf8')).toBe('one\n');
    restoreCheckpoint(r.src, c.id);
    expect(fs.readFileSync(join(r.ws, 'a.txt'), 'utf8')).toBe('one\n');
    expect(fs.readFileSync(join(r.ws, 'sub', 'b.bin'))).toEqual(Buffer.from([0, 1, 2, 255]));
    expect(fs.existsSync(join(r.ws, 'new.txt'))).toBe(false);
    expect(fs.readFileSync(join(r.home, 'conversation.jsonl'), 'utf8')).toBe('{"turn":1}\n');
    expect(listCheckpoints(r.project, 'web:alice')).toEqual([]); // used up
  });

  it("an unchanged file shares the previous checkpoint's copy, a changed one is copied; the restored tree never shares an inode with a checkpoint", () => {
    const r = rig();
    fs.writeFileSync(join(r.ws, 'big'), Buffer.alloc(256 * 1024, 7));
    fs.writeFileSync(join(r.ws, 'edit'), 'v1');
    age(join(r.ws, 'big'));
    age(join(r.ws, 'edit'));
    const first = takeCheckpoint(r.src, BOUNDS);
    fs.writeFileSync(join(r.ws, 'edit'), 'v2');
    const obj = (id: string, name: string) => saved(r, id, name).object;
    // The first checkpoint's files were changed (made) moments before it: copied again, never linked.
    const second = takeCheckpoint(r.src, BOUNDS);
    expect(second.base).toBe(first.id);
    expect(obj(second.id, 'edit')).not.toBe(obj(first.id, 'edit'));
    expect(obj(second.id, 'big')).not.toBe(obj(first.id, 'big'));
    // Make the base look old enough (its start long after the files' ctime): now the unchanged one is linked.
    const metaFile = join(cpDir(r, second.id), 'meta.json');
    const m = JSON.parse(fs.readFileSync(metaFile, 'utf8')) as CheckpointMeta;
    fs.writeFileSync(metaFile, JSON.stringify({ ...m, started_ns: String(BigInt(Date.now() + 10_000) * 1_000_000n) }));
    fs.writeFileSync(join(r.ws, 'edit'), 'v3');
    const third = takeCheckpoint(r.src, BOUNDS);
    expect(obj(third.id, 'big')).toBe(obj(second.id, 'big'));
    expect(obj(third.id, 'edit')).not.toBe(obj(second.id, 'edit'));
    expect(third.linked_bytes).toBeGreaterThanOrEqual(256 * 1024);
    expect(third.owned_bytes).toBeLessThan(256 * 1024);
    expect(fs.readFileSync(obj(second.id, 'edit'), 'utf8')).toBe('v2');
    fs.writeFileSync(join(r.ws, 'edit'), 'v4');
    restoreCheckpoint(r.src, third.id);
    expect(fs.readFileSync(join(r.ws, 'edit'), 'utf8')).toBe('v3');
    const restored = fs.statSync(join(r.ws, 'big'));
    expect(restored.ino).not.toBe(fs.statSync(obj(second.id, 'big')).ino);
    expect(restored.nlink).toBe(1);
    // Restoring to the third used it up: the second keeps its own objects and the one it shared.
    expect(fs.readFileSync(obj(second.id, 'big'))).toEqual(Buffer.alloc(256 * 1024, 7));
    expect(fs.existsSync(join(cpDir(r, second.id), '..', '.objects', third.id))).toBe(false);
  });

  it('links stay links (never followed), hard links stay one file, fifos and sockets are left out, holes stay holes', async () => {
    const r = rig();
    const outside = join(r.root, 'outside-secret');
    fs.writeFileSync(outside, 'not the tenant’s');
    fs.symlinkSync(outside, join(r.ws, 'escape'));
    fs.symlinkSync('/', join(r.ws, 'root'));
    fs.writeFileSync(join(r.ws, 'h1'), 'shared');
    fs.linkSync(join(r.ws, 'h1'), join(r.ws, 'h2'));
    execFileSync('mkfifo', [join(r.ws, 'pipe')]);
    const server = net.createServer().listen(join(r.ws, 'sock'));
    await new Promise((ok) => server.once('listening', ok));
    closers.push(() => server.close());
    const sparse = join(r.ws, 'sparse');
    const fd = fs.openSync(sparse, 'w');
    fs.writeSync(fd, 'head', 0);
    fs.writeSync(fd, 'tail', 2 * 1024 ** 3); // 2 GiB apparent, two blocks
    fs.closeSync(fd);
    const c = takeCheckpoint(r.src, BOUNDS);
    expect(c.skipped).toBe(2);
    expect(saved(r, c.id, 'escape')).toMatchObject({ y: 'l', to: outside });
    expect(saved(r, c.id, 'root')).toMatchObject({ y: 'l', to: '/' });
    // One file under two names: the second name found points at the first, and its bytes count once.
    const names = [saved(r, c.id, 'h1'), saved(r, c.id, 'h2')].map((e) => (e.y === 'f' ? [e.h, e.b > 0] : []));
    expect(names.map(([h, owns]) => [h === undefined, owns]).sort()).toEqual([
      [false, false],
      [true, true],
    ]);
    expect(saved(r, c.id, 'h2').object).toBe(saved(r, c.id, 'h1').object);
    const st = fs.statSync(saved(r, c.id, 'sparse').object);
    expect(st.size).toBe(2 * 1024 ** 3 + 4);
    expect(st.blocks * 512).toBeLessThan(1024 * 1024);
    expect(c.owned_bytes).toBeLessThan(1024 * 1024);
    // The tenant swaps its files for links to berth's own: a restore writes through neither.
    fs.rmSync(join(r.ws, 'h1'));
    fs.symlinkSync(outside, join(r.ws, 'h1'));
    restoreCheckpoint(r.src, c.id);
    expect(fs.readFileSync(outside, 'utf8')).toBe('not the tenant’s');
    expect(fs.readFileSync(join(r.ws, 'h1'), 'utf8')).toBe('shared');
    expect(fs.statSync(join(r.ws, 'h1')).ino).toBe(fs.statSync(join(r.ws, 'h2')).ino);
    expect(fs.existsSync(join(r.ws, 'pipe'))).toBe(false);
    const back = fs.statSync(join(r.ws, 'sparse'));
    expect([back.size, back.blocks * 512 < 1024 * 1024]).toEqual([2 * 1024 ** 3 + 4, true]);
    const head = Buffer.alloc(4);
    const rfd = fs.openSync(join(r.ws, 'sparse'), 'r');
    fs.readSync(rfd, head, 0, 4, 2 * 1024 ** 3);
    fs.closeSync(rfd);
    expect(head.toString()).toBe('tail');
  });

  it('over the bounds: no checkpoint at all (nothing half-made), and the oldest go first', () => {
    const r = rig();
    fs.writeFileSync(join(r.ws, 'f'), Buffer.alloc(64 * 1024, 1));
    let err: unknown;
    try {
      takeCheckpoint(r.src, { keep: 10, bytes: 16 * 1024, files: 100 });
    } catch (e) {
      err = e;
    }
    expect(isBerthError(err, 'LIMIT_REACHED')).toBe(true);
    for (let i = 0; i < 5; i++) fs.writeFileSync(join(r.ws, `n${i}`), 'x');
    expect(() => takeCheckpoint(r.src, { keep: 10, bytes: 1 << 30, files: 3 })).toThrow(/files and folders/);
    const tenantDir = join(r.project.paths.stateDir, 'checkpoints');
    const one = () => join(tenantDir, fs.readdirSync(tenantDir)[0] as string);
    const leftovers = () => fs.readdirSync(one()).filter((n) => !n.startsWith('.'));
    const objects = () => fs.readdirSync(join(one(), '.objects')).sort();
    expect(leftovers()).toEqual([]);
    expect(objects()).toEqual([]);
    const ids = [1, 2, 3].map(() => takeCheckpoint(r.src, { keep: 2, bytes: 1 << 30, files: 100 }).id);
    expect(listCheckpoints(r.project, 'web:alice').map((c) => c.id)).toEqual(ids.slice(1));
    expect(leftovers().sort()).toEqual(ids.slice(1));
    // The pruned one's copies went with it; the kept ones hold theirs (each copied all: made within the racy window).
    expect(objects()).toEqual(ids.slice(1));
  });

  it('a folder the tenant replaced by a link to elsewhere is kept as that link, never followed', () => {
    const r = rig();
    fs.mkdirSync(join(r.ws, 'd'));
    fs.writeFileSync(join(r.ws, 'd', 'x'), 'x');
    // What a racing tenant leaves: the name is a link by the time it is read.
    fs.rmSync(join(r.ws, 'd'), { recursive: true });
    fs.symlinkSync(r.root, join(r.ws, 'd'));
    const c = takeCheckpoint(r.src, BOUNDS);
    expect(saved(r, c.id, 'd')).toMatchObject({ y: 'l', to: r.root });
    expect(c.files).toBe(1);
  });
});
