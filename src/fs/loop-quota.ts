import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { BerthError, errnoOf } from '../base/errors.js';
import { copyTreeExact, treeFits } from './copy-tree-exact.js';
import { at, openChildDir, openNoFollow, withFd } from './fd-path.js';
import { removeTreeAt, type Owner } from './tree.js';
import { isMounted, mountsUnder, mountTable } from './mount-table.js';

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
  /**
   * The directory that holds the workspace (opened no-follow by the caller) and the workspace's
   * name in it: berth reaches the workspace only through these, never by its path.
   */
  parentFd: number;
  name: string;
  /** The workspace's host path: where the kernel must show the mount (checked, never followed). */
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

/** What else runs while berth changes a workspace's filesystem. */
export interface QuotaHolds {
  /** A container of this workspace: no copy of its tree into a new image this time. */
  inUse?: boolean;
  /** A container that sees every workspace (shared mode): no image is made, filled or resized while it lives. */
  seesAll?: boolean;
}

const MIB = 1024 * 1024;
/** Never fill berth's own filesystem with tenant images past this much free space. */
const HOST_RESERVE_BYTES = 1024 * MIB;
const MOUNT_OPTIONS = 'loop,nodev,nosuid';
/** Named, never probed: a tenant's bytes could make its image look like another filesystem type. */
const MOUNT_TYPE = ['-t', 'ext4'];
/** A descriptor handed to a tool is its fd 3: mount and umount act on what it holds, never on a path. */
const CHILD_FD = '/proc/self/fd/3';

/** Run a tool (argv, no shell); `okExits` lists the non-zero exits that are not failures; `fd` becomes its fd 3. */
function run(cmd: string, args: string[], okExits: number[] = [], fd?: number): string {
  try {
    return execFileSync(cmd, args, {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe', ...(fd === undefined ? [] : [fd])],
      timeout: 120_000,
    });
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string; status?: number | null };
    if (e.status != null && okExits.includes(e.status)) return e.stdout ?? '';
    // The tool's own words name host paths: they go to berth's log (the cause), never to a chat.
    const why = [e.stderr, e.stdout, e.message]
      .map((t) => t?.trim())
      .find(Boolean)
      ?.split('\n')
      .slice(-2)
      .join(' / ');
    throw new BerthError(
      'DISK_QUOTA_FAILED',
      `the workspace's filesystem could not be set up (${cmd} failed)`,
      {
        hint: 'disk_quotas: loop needs root, loop devices and e2fsprogs (mkfs.ext4, e2fsck, resize2fs); "berth doctor" checks them, or set disk_quotas: off',
      },
      { cause: new Error(`${cmd} ${args.join(' ')}: ${why}`) },
    );
  }
}

/** Detach the mount whose root the descriptor holds (lazily: berth's own descriptor would make it busy). */
const unmountFd = (fd: number) => run('umount', ['-l', '--no-canonicalize', CHILD_FD], [], fd);

/**
 * Unmount every mount at path (a second berth may have stacked one); true if any was there. The
 * path is opened component by component without following a link: a link in the way is not
 * followed to some other mount, and what is there stays.
 */
export function releaseLoopQuota(path: string): boolean {
  let any = false;
  for (let i = 0; i < 8 && isMounted(path); i++) {
    let opened: { fd: number; kind: string };
    try {
      opened = openNoFollow(path);
    } catch {
      break;
    }
    withFd(opened.fd, unmountFd);
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
    throw new BerthError(
      'DISK_FULL',
      `no room for another workspace of ${Math.round(spec.sizeBytes / MIB)} MiB (berth keeps ${HOST_RESERVE_BYTES / MIB} MiB free for its own files)`,
      {
        hint: 'free space where berth keeps its state, or lower limits.disk_mb',
      },
    );
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

/** A directory an image is mounted on: reached by a no-follow open, and where the kernel must show the mount. */
interface MountPlace {
  open(): number;
  path: string;
}

function workspacePlace(spec: LoopQuotaSpec): MountPlace {
  return {
    path: spec.mountpoint,
    open() {
      const fd = openChildDir(spec.parentFd, spec.name, `workspaces/${spec.name}`);
      if (fd === undefined)
        throw new BerthError('E_SANDBOX_VIOLATION', `workspace ${spec.name} vanished`, { path: `workspaces/${spec.name}` });
      return fd;
    },
  };
}

/** The workspace is a filesystem of its own (its directory is on another device than the one holding it). */
const isOwnFilesystem = (spec: LoopQuotaSpec, place: MountPlace) =>
  withFd(place.open(), (fd) => fs.fstatSync(fd).dev !== fs.fstatSync(spec.parentFd).dev);

/**
 * Mount the image on the directory the place's descriptor holds (mount follows no path), then
 * make sure the kernel shows it there and nowhere else: a directory moved in between puts the
 * mount where it went, and that mount is undone and the step refused.
 */
function mountOn(image: string, place: MountPlace): void {
  let failed: unknown;
  try {
    withFd(place.open(), (fd) => run('mount', ['--no-canonicalize', ...MOUNT_TYPE, '-o', MOUNT_OPTIONS, image, CHILD_FD], [], fd));
  } catch (err) {
    failed = err; // mount(8) may fail after the kernel mounted: what it left is checked all the same
  }
  const devices = new Set(
    run('losetup', ['-j', image])
      .split('\n')
      .map((l) => /^(\/dev\/loop\d+):/.exec(l)?.[1])
      .filter(Boolean),
  );
  const mine = mountTable().filter((m) => devices.has(m.source));
  const stray = mine.filter((m) => m.point !== place.path);
  for (const m of stray) detachStray(m);
  if (failed) throw failed;
  if (stray.length > 0 || !mine.some((m) => m.point === place.path)) {
    throw new BerthError('E_SANDBOX_VIOLATION', 'the workspace moved while berth gave it its filesystem; berth undid the mount', {
      path: basename(place.path),
    });
  }
  // e2fsck re-creates lost+found when it needs one; the tenant's tree starts empty.
  withFd(place.open(), (root) => {
    try {
      fs.rmdirSync(at(root, 'lost+found'));
    } catch {
      // not there, or not empty: either way it is harmless
    }
  });
}

/** Quota steps are synchronous (they run under the workspace's lock): a short wait blocks too. */
const sleepSync = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/** How long berth keeps trying to reach a mount whose directory was moved (the mover may still be at it). */
const STRAY_DETACH_MS = 2_000;

/**
 * Undo a mount the kernel shows at a name other than the workspace's. That name may be swapped
 * for a link or another directory at any moment, so each try opens it without following and
 * detaches only a directory that is this loop device's root (never a neighbour's mount); while
 * the name points elsewhere it tries again. A mover that never stops leaves the mount where it
 * put it: still the tenant's own directory, and the step is refused all the same.
 */
function detachStray(m: { point: string; source: string }): void {
  const dev = fs.statSync(m.source).rdev;
  const shown = () => mountTable().some((t) => t.point === m.point && t.source === m.source);
  for (const end = Date.now() + STRAY_DETACH_MS; shown() && Date.now() < end;) {
    try {
      withFd(openNoFollow(m.point).fd, (fd) => {
        if (fs.fstatSync(fd).dev === dev) unmountFd(fd);
      });
    } catch {
      // the name is a link or gone right now
    }
    if (shown()) sleepSync(5);
  }
}

/** One entry read, not all of them: a tenant's directory may hold millions. */
function isEmptyDir(fd: number): boolean {
  const dir = fs.opendirSync(`/proc/self/fd/${fd}`);
  try {
    return dir.readSync() === null;
  } finally {
    dir.closeSync();
  }
}

/**
 * Make sure the workspace (an existing directory) is its image, mounted, at spec.sizeBytes.
 * First time: a new image; what the directory already holds is copied in (by descriptor: links,
 * modes and hardlinks kept, nothing followed), and a directory that holds more than the quota
 * is refused with nothing changed. Later: mounted again if it is not (after a reboot), resized
 * offline if limits.disk_mb changed. While a container that sees every workspace lives, no
 * image is made or resized: it could move the directory under berth.
 */
export function ensureLoopQuota(spec: LoopQuotaSpec, scratchDir: string, holds: QuotaHolds = {}): QuotaEnsured {
  const result: QuotaEnsured = { mounted: true, created: false, migrated: false };
  const place = workspacePlace(spec);
  if (!fs.existsSync(spec.image)) {
    const empty = withFd(place.open(), isEmptyDir);
    if (holds.seesAll || (holds.inUse && !empty)) {
      // A running container could change the tree under the copy (or, seeing every workspace, move it).
      return {
        ...result,
        mounted: false,
        warning: 'the workspace gets its own filesystem at a run when no container of it (or of the whole project) is running',
      };
    }
    if (!empty) {
      // Counted first (names and sizes only): a tree that cannot fit costs a walk, not a copy into ENOSPC.
      const fit = withFd(place.open(), (fd) => treeFits(fd, { bytes: spec.sizeBytes, entries: inodesFor(spec) }));
      if (!fit.fits) throw tooFull(fit.why);
    }
    const tmp = createImage(spec);
    try {
      if (!empty) {
        withFd(place.open(), (fd) => copyInto(tmp, fd, scratchDir));
        result.migrated = true;
      }
      fs.renameSync(tmp, spec.image); // the commit point: from here the image is the workspace
    } finally {
      fs.rmSync(tmp, { force: true });
    }
    result.created = true;
  }
  const current = fs.statSync(spec.image).size;
  const held = `limits.disk_mb is now ${Math.round(spec.sizeBytes / MIB)} MiB, but a container that sees every workspace still runs; it keeps ${Math.round(current / MIB)} MiB until then`;
  if (!isOwnFilesystem(spec, place)) {
    if (current !== spec.sizeBytes) {
      if (holds.seesAll) result.warning = held;
      else resizeInto(result, spec, current);
    }
    const kept = mountOver(spec, place, result.migrated);
    if (kept) result.warning = `files written while the workspace's image was not mounted were moved to ${kept}`;
  } else if (current !== spec.sizeBytes) {
    if (holds.seesAll) return { ...result, warning: held };
    // Mounted at the old size: a resize needs it unmounted (runs of this workspace hold its lock).
    withFd(place.open(), unmountFd);
    try {
      resizeInto(result, spec, current);
    } finally {
      mountOn(spec.image, place); // a failed resize leaves it at its old size, never unmounted
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
    sleepSync(10);
  }
  return true;
}

/**
 * Mount the image at the workspace. Anything in the bare directory is moved aside first: right
 * after a migration it is the copy the image now holds (dropped); otherwise someone wrote there
 * while the image was not mounted, and it is kept beside the workspace for the operator.
 */
function mountOver(spec: LoopQuotaSpec, place: MountPlace, justCopied: boolean): string | undefined {
  if (withFd(place.open(), isEmptyDir)) {
    mountOn(spec.image, place);
    return undefined;
  }
  const aside = `.${spec.name}.unmounted-${Date.now()}`;
  fs.renameSync(at(spec.parentFd, spec.name), at(spec.parentFd, aside));
  fs.mkdirSync(at(spec.parentFd, spec.name), { mode: 0o755 });
  mountOn(spec.image, place);
  if (!justCopied) return join(dirname(spec.mountpoint), aside);
  removeTreeAt(spec.parentFd, aside);
  return undefined;
}

function tooFull(why: string, cause?: unknown): BerthError {
  return new BerthError(
    'DISK_QUOTA_FAILED',
    `the workspace cannot get its own filesystem: ${why}`,
    { hint: 'raise limits.disk_mb (or limits.files) for the project, or clear the workspace; nothing was changed' },
    { cause },
  );
}

/** Copy a directory's content (by descriptor) into a new image, mounted at a scratch point only berth reaches. */
function copyInto(image: string, fromFd: number, scratchDir: string): void {
  const path = join(scratchDir, `quota-${randomBytes(6).toString('hex')}`);
  fs.mkdirSync(path, { recursive: true, mode: 0o700 });
  try {
    mountOn(image, { path, open: () => openNoFollow(path).fd });
    try {
      withFd(openNoFollow(path).fd, (to) => copyTreeExact(fromFd, to));
    } catch (err) {
      if (err instanceof BerthError) throw err;
      throw tooFull(`it holds more than limits.disk_mb or limits.files allow`, err);
    } finally {
      releaseLoopQuota(path);
    }
  } finally {
    fs.rmSync(path, { recursive: true, force: true });
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
