import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { BerthError, errnoOf } from '../errors.js';
import type { Owner } from './tree.js';

/**
 * Kernel-enforced disk quotas where the host has no project quotas: each tenant workspace is its
 * own ext4 image, loop-mounted (nodev, nosuid) at the workspace directory. A tenant that fills it
 * gets ENOSPC inside its container; neighbours and berth's state live on other filesystems.
 * Mounts are kernel state: they outlive berth, so every run first makes sure the image is mounted
 * (a reboot unmounts them all). Commands get argv arrays, never a shell.
 */
export interface LoopQuotaSpec {
  /** The ext4 image, in berth's private state. */
  image: string;
  /** The workspace directory it is mounted at. */
  mountpoint: string;
  sizeBytes: number;
  /** Inodes: the kernel's bound on files and directories. */
  files: number;
  owner?: Owner;
}

export interface QuotaEnsured {
  /** The workspace is its image, mounted (false only when its first image had to wait). */
  mounted: boolean;
  created: boolean;
  /** Content that was in the directory before it had a quota, moved into the image. */
  migrated: boolean;
  /** The size changed (offline: unmount, fsck, resize2fs, mount). */
  resized?: { fromBytes: number; toBytes: number };
  /** Why the size could not change this time (the old size holds), or where stray files went. */
  warning?: string;
}

const MIB = 1024 * 1024;
/** Never fill berth's own filesystem with tenant images past this much free space. */
const HOST_RESERVE_BYTES = 1024 * MIB;
const MOUNT_OPTIONS = 'loop,nodev,nosuid';

/** Run a tool (argv, no shell); `okExits` lists the non-zero exits that are not failures. */
function run(cmd: string, args: string[], okExits: number[] = []): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string; status?: number | null };
    if (e.status != null && okExits.includes(e.status)) return e.stdout ?? '';
    // The tool's own words name host paths: they go to berth's log (the cause), never to a chat.
    const why = [e.stderr, e.stdout, e.message].map((t) => t?.trim()).find(Boolean)?.split('\n').slice(-2).join(' / ');
    throw new BerthError(
      'DISK_QUOTA_FAILED',
      `the workspace's filesystem could not be set up (${cmd} failed)`,
      { hint: 'disk_quotas: loop needs root, loop devices and e2fsprogs (mkfs.ext4, e2fsck, resize2fs); "berth doctor" checks them, or set disk_quotas: off' },
      { cause: new Error(`${cmd} ${args.join(' ')}: ${why}`) },
    );
  }
}

/** Decode mountinfo's octal escapes (\040 is a space). */
const unescapeMount = (s: string) => s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));

/** Mount points of this process's namespace, in mount order. */
export function mountPoints(): string[] {
  const text = fs.readFileSync('/proc/self/mountinfo', 'utf8');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => unescapeMount(line.split(' ')[4] ?? ''));
}

export const isMounted = (path: string): boolean => mountPoints().includes(path);

/** Mount points at or below dir, deepest first (the order they can be unmounted in). */
export function mountsUnder(dir: string): string[] {
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  return mountPoints()
    .filter((p) => p === dir || p.startsWith(prefix))
    .sort((a, b) => b.length - a.length);
}

/** Unmount every mount at path (a second berth may have stacked one); true if any was there. */
export function releaseLoopQuota(path: string): boolean {
  let any = false;
  for (let i = 0; i < 8 && isMounted(path); i++) {
    run('umount', [path]);
    any = true;
  }
  return any;
}

/** Unmount every quota below dir (project delete, tests): an rm -rf over a live mount fails. */
export function releaseMountsUnder(dir: string): number {
  let n = 0;
  for (const path of mountsUnder(dir)) if (releaseLoopQuota(path)) n++;
  return n;
}

const inodesFor = (spec: LoopQuotaSpec) => Math.max(64, Math.min(spec.files, Math.floor(spec.sizeBytes / 8192)));

/** A new image, complete before it gets its name: a crash leaves a temp file, never half an image. */
function createImage(spec: LoopQuotaSpec): string {
  fs.mkdirSync(dirname(spec.image), { recursive: true, mode: 0o700 });
  // Each image is real disk on berth's own filesystem: a new tenant never takes the room its journal needs.
  const st = fs.statfsSync(dirname(spec.image));
  if (st.bavail * st.bsize < spec.sizeBytes + HOST_RESERVE_BYTES) {
    throw new BerthError('DISK_FULL', `no room for another workspace of ${Math.round(spec.sizeBytes / MIB)} MiB (berth keeps ${HOST_RESERVE_BYTES / MIB} MiB free for its own files)`, {
      hint: 'free space where berth keeps its state, or lower limits.disk_mb',
    });
  }
  const tmp = `${spec.image}.${randomBytes(4).toString('hex')}.tmp`;
  try {
    // fallocate, not truncate: the host disk is never promised to more tenants than it holds.
    run('fallocate', ['-l', String(spec.sizeBytes), tmp]);
    const owner = spec.owner ? ['-E', `root_owner=${spec.owner.uid}:${spec.owner.gid}`] : [];
    run('mkfs.ext4', ['-q', '-F', '-m', '0', '-N', String(inodesFor(spec)), ...owner, tmp]);
    fs.chmodSync(tmp, 0o600);
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
  return tmp;
}

function mountImage(image: string, mountpoint: string): void {
  run('mount', ['-o', MOUNT_OPTIONS, image, mountpoint]);
  // e2fsck re-creates lost+found when it needs one; the tenant's tree starts empty.
  try {
    fs.rmdirSync(join(mountpoint, 'lost+found'));
  } catch {
    // not there, or not empty: either way it is harmless
  }
}

const isEmptyDir = (dir: string) => fs.readdirSync(dir).length === 0;

/**
 * Make sure spec.mountpoint (an existing directory) is its image, mounted, at spec.sizeBytes.
 * First time: a new image; what the directory already holds is copied in (cp -a: links, modes
 * and hardlinks kept, nothing followed), and a directory that holds more than the quota is
 * refused with nothing changed. Later: mounted again if it is not (after a reboot), resized
 * offline if limits.disk_mb changed.
 */
export function ensureLoopQuota(spec: LoopQuotaSpec, scratchDir: string, opts: { inUse?: boolean } = {}): QuotaEnsured {
  const result: QuotaEnsured = { mounted: true, created: false, migrated: false };
  if (!fs.existsSync(spec.image)) {
    if (opts.inUse && !isEmptyDir(spec.mountpoint)) {
      // A container of this workspace runs (another berth's): its tenant could change the tree under the copy.
      return { ...result, mounted: false, warning: 'the workspace gets its own filesystem at a run when no container of it is running' };
    }
    const tmp = createImage(spec);
    try {
      if (!isEmptyDir(spec.mountpoint)) {
        copyInto(tmp, spec.mountpoint, scratchDir);
        result.migrated = true;
      }
      fs.renameSync(tmp, spec.image); // the commit point: from here the image is the workspace
    } finally {
      fs.rmSync(tmp, { force: true });
    }
    result.created = true;
  }
  const current = fs.statSync(spec.image).size;
  if (!isMounted(spec.mountpoint)) {
    if (current !== spec.sizeBytes) resizeInto(result, spec, current);
    const kept = mountOver(spec, result.migrated);
    if (kept) result.warning = `files written while the workspace's image was not mounted were moved to ${kept}`;
  } else if (current !== spec.sizeBytes) {
    // Mounted at the old size: a resize needs it unmounted (runs of this workspace hold its lock).
    try {
      releaseLoopQuota(spec.mountpoint);
    } catch (err) {
      return { ...result, warning: `limits.disk_mb changed, but the workspace is in use: ${(err as Error).message}` };
    }
    try {
      resizeInto(result, spec, current);
    } finally {
      mountImage(spec.image, spec.mountpoint); // a failed resize leaves it at its old size, never unmounted
    }
  }
  return result;
}

/**
 * Resize unless the filesystem is still alive somewhere: a container's bind mount (another mount
 * namespace) keeps the loop device attached after the host's unmount, and fsck or resize2fs on a
 * live filesystem would corrupt it. Then the old size holds until nothing uses it.
 */
function resizeInto(result: QuotaEnsured, spec: LoopQuotaSpec, current: number): void {
  if (loopAttached(spec.image)) {
    result.warning = `limits.disk_mb is now ${Math.round(spec.sizeBytes / MIB)} MiB, but a container still uses the workspace; it keeps ${Math.round(current / MIB)} MiB until then`;
    return;
  }
  const warning = resize(spec.image, current, spec.sizeBytes);
  if (warning) result.warning = warning;
  else result.resized = { fromBytes: current, toBytes: spec.sizeBytes };
}

/** Is the image attached to a loop device (mounted in some namespace)? Detaching after the last unmount may take a moment. */
function loopAttached(image: string): boolean {
  for (let i = 0; i < 20; i++) {
    if (run('losetup', ['-j', image]).trim() === '') return false;
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10); // 10 ms, synchronously
  }
  return true;
}

/**
 * Mount the image at the directory. Anything in the bare directory is moved aside first: right
 * after a migration it is the copy the image now holds (dropped); otherwise someone wrote there
 * while the image was not mounted, and it is kept beside the workspace for the operator.
 */
function mountOver(spec: LoopQuotaSpec, justCopied: boolean): string | undefined {
  const dir = spec.mountpoint;
  if (isEmptyDir(dir)) {
    mountImage(spec.image, dir);
    return undefined;
  }
  const aside = join(dirname(dir), `.${basename(dir)}.unmounted-${Date.now()}`);
  fs.renameSync(dir, aside);
  fs.mkdirSync(dir, { mode: 0o755 });
  mountImage(spec.image, dir);
  if (!justCopied) return aside;
  fs.rmSync(aside, { recursive: true, force: true });
  return undefined;
}

/** Copy a directory's content into a new image (mounted at a scratch point for the copy). */
function copyInto(image: string, from: string, scratchDir: string): void {
  const at = join(scratchDir, `quota-${randomBytes(6).toString('hex')}`);
  fs.mkdirSync(at, { recursive: true, mode: 0o700 });
  try {
    mountImage(image, at);
    try {
      run('cp', ['-a', '--no-dereference', '--', `${from}/.`, `${at}/`]);
    } catch (err) {
      throw new BerthError(
        'DISK_QUOTA_FAILED',
        'the workspace holds more than limits.disk_mb allows, so it cannot get its own filesystem',
        { hint: 'raise limits.disk_mb for the project, or clear the workspace; nothing was changed' },
        { cause: err },
      );
    } finally {
      releaseLoopQuota(at);
    }
  } finally {
    fs.rmSync(at, { recursive: true, force: true });
  }
}

/** Offline resize; returns a warning (and changes nothing) when the data does not fit the new size. */
function resize(image: string, fromBytes: number, toBytes: number): string | undefined {
  run('e2fsck', ['-f', '-p', image], [1]); // 1: it fixed something (it re-creates lost+found, which berth removes)
  const sizeK = `${Math.floor(toBytes / 1024)}K`;
  if (toBytes > fromBytes) {
    run('fallocate', ['-l', String(toBytes), image]);
    run('resize2fs', [image, sizeK]);
    return undefined;
  }
  try {
    run('resize2fs', [image, sizeK]);
  } catch {
    return `limits.disk_mb is now ${Math.round(toBytes / MIB)} MiB, but the workspace holds more; it keeps ${Math.round(fromBytes / MIB)} MiB until it is cleared`;
  }
  fs.truncateSync(image, toBytes);
  return undefined;
}

/** What a quota'd workspace holds, from the filesystem itself (no walk). */
export function quotaUsage(mountpoint: string): { usedBytes: number; sizeBytes: number; files: number; filesMax: number } {
  const st = fs.statfsSync(mountpoint);
  return {
    usedBytes: (st.blocks - st.bfree) * st.bsize,
    sizeBytes: st.blocks * st.bsize,
    files: st.files - st.ffree,
    filesMax: st.files,
  };
}

/** Can this host do loop quotas? (doctor's question; checked without mounting anything) */
export function loopQuotaSupport(): { ok: boolean; detail: string } {
  if (process.platform !== 'linux') return { ok: false, detail: 'loop quotas need Linux' };
  if (process.getuid?.() !== 0) return { ok: false, detail: 'loop quotas need berth to run as root (mount)' };
  for (const tool of ['mkfs.ext4', 'e2fsck', 'resize2fs', 'fallocate', 'losetup', 'mount', 'umount']) {
    try {
      execFileSync('which', [tool], { stdio: 'ignore' });
    } catch {
      return { ok: false, detail: `${tool} is not installed (apt-get install e2fsprogs util-linux)` };
    }
  }
  try {
    fs.accessSync('/dev/loop-control');
  } catch (err) {
    return { ok: false, detail: `no loop devices (/dev/loop-control: ${errnoOf(err) ?? 'missing'})` };
  }
  return { ok: true, detail: 'ext4 images, loop-mounted per workspace' };
}
