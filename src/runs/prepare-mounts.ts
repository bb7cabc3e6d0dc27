import fs from 'node:fs';
import { BerthError } from '../errors.js';
import { closeQuietly, fdRealPath, openNoFollow, openRegularFile, openRootDir, withFd } from '../fs/fd-path.js';
import { displace, ensureDirPath, kindAt, openDirPath, writeNewFileAt, type Owner } from '../fs/tree.js';
import { RESERVED_PROJECT_PATHS, type RunPlan } from '../plan/run-plan.js';

/**
 * Right before launch, make the host tree match the plan. The engine follows symlinks in bind
 * sources and runc follows them in mount targets, so: the rw root must be the real directory
 * the plan names (checked through a no-follow walk and the descriptor's real path), and every
 * protected mountpoint inside it must be a real file or directory of the planned kind —
 * whatever a tenant left there instead (a link, a fifo, a file where a directory belongs) is
 * moved aside, not followed.
 */
export function prepareMounts(opts: {
  plan: RunPlan;
  projectDir: string;
  isolated: boolean;
  /** The tenant workspace; absent for a run in the private workspace (workflow steps). */
  workspaceId?: string;
  owner?: Owner;
  /** A directory to create (no-follow) below the rw root, e.g. work/runs/<run_id>. */
  ensureDir?: string[];
}): void {
  const { plan, owner } = opts;
  withFd(openRootDir(opts.projectDir), (projectFd) => {
    const rwFd = opts.isolated && opts.workspaceId ? openDirPath(projectFd, ['workspaces', opts.workspaceId], '') : dup(projectFd);
    if (rwFd === undefined) throw new BerthError('E_SANDBOX_VIOLATION', 'the workspace disappeared before launch');
    try {
      const real = fdRealPath(rwFd);
      if (real !== plan.prepare.rwRoot) {
        throw new BerthError('E_SANDBOX_VIOLATION', `mount source resolves to ${real}, not ${plan.prepare.rwRoot}`, {
          path: plan.prepare.rwRoot,
        });
      }
      if (!opts.isolated) {
        const meta = openRegularFile(rwFd, RESERVED_PROJECT_PATHS.metadata, RESERVED_PROJECT_PATHS.metadata);
        if (!meta) throw new BerthError('PROJECT_NOT_FOUND', 'metadata.json disappeared before launch');
        closeQuietly(meta.fd);
        closeQuietly(ensureDirPath(rwFd, [RESERVED_PROJECT_PATHS.sessions], { displace: true, shownRoot: '', mode: 0o700 }));
        closeQuietly(ensureDirPath(rwFd, [RESERVED_PROJECT_PATHS.memory], { displace: true, shownRoot: '', mode: 0o755 }));
        closeQuietly(ensureDirPath(rwFd, [RESERVED_PROJECT_PATHS.workflows], { displace: true, shownRoot: '', mode: 0o755 }));
        if (opts.workspaceId) closeQuietly(ensureDirPath(rwFd, ['workspaces', opts.workspaceId], { displace: true, owner, shownRoot: '' }));
      }
      if (opts.ensureDir) closeQuietly(ensureDirPath(rwFd, opts.ensureDir, { displace: true, owner, shownRoot: '' }));
      for (const { path, kind } of plan.prepare.mountpoints) {
        const parts = path.split('/');
        const name = parts.pop() as string;
        withFd(ensureDirPath(rwFd, parts, { displace: true, owner, shownRoot: '' }), (parentFd) => {
          const found = kindAt(parentFd, name);
          if (found === kind) return;
          if (found !== 'missing') displace(parentFd, name);
          if (kind === 'file') {
            writeNewFileAt(parentFd, name, '', 0o644, owner);
          } else {
            fs.mkdirSync(`/proc/self/fd/${parentFd}/${name}`, { mode: 0o755 });
            if (owner) fs.lchownSync(`/proc/self/fd/${parentFd}/${name}`, owner.uid, owner.gid);
          }
        });
      }
    } finally {
      closeQuietly(rwFd);
    }
  });
  // Then every other mount source (memory, metadata, workflows, the gateway socket, snapshots, seeds,
  // shared areas) must be exactly the path planned, with no link in any component, in every mode.
  for (const m of plan.mounts) {
    if (m.type !== 'bind' || m.source === plan.prepare.rwRoot) continue;
    withFd(openNoFollow(m.source).fd, (fd) => {
      if (fdRealPath(fd) !== m.source) throw new BerthError('E_SANDBOX_VIOLATION', `mount source ${m.source} is not the path berth planned`, { path: m.source });
    });
  }
}

function dup(fd: number): number {
  return fs.openSync(`/proc/self/fd/${fd}`, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY);
}
