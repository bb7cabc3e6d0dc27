import fs from 'node:fs';
import { BerthError } from '../base/errors.js';
import { at, closeQuietly, fdRealPath, openPlannedSource, openRegularFile, openRootDir, withFd } from '../fs/fd-path.js';
import { displace, ensureDirPath, kindAt, openDirPath, writeNewFileAt, type Owner } from '../fs/tree.js';
import type { RunPlan } from '../plan/run-plan.js';

/**
 * Right before launch, make the host tree what the plan says (plan.prepare): the plan decided
 * everything, this only walks the tree without following links and moves aside what a tenant
 * left in the way. Then every other mount source is opened the same way, in every mode.
 */
export function prepareMounts(plan: RunPlan, projectDir: string, owner?: Owner): void {
  const p = plan.prepare;
  withFd(openRootDir(projectDir), (projectFd) => {
    const rwFd = openDirPath(projectFd, p.rwRootPath, '');
    if (rwFd === undefined) throw new BerthError('E_SANDBOX_VIOLATION', 'the workspace disappeared before launch');
    try {
      const real = fdRealPath(rwFd);
      if (real !== p.rwRoot)
        throw new BerthError('E_SANDBOX_VIOLATION', `mount source resolves to ${real}, not ${p.rwRoot}`, { path: p.rwRoot });
      for (const file of p.files) {
        const opened = openRegularFile(rwFd, file, file);
        if (!opened) throw new BerthError('PROJECT_NOT_FOUND', `${file} disappeared before launch`);
        closeQuietly(opened.fd);
      }
      for (const dir of p.dirs) {
        closeQuietly(
          ensureDirPath(rwFd, dir.path.split('/'), {
            displace: true,
            shownRoot: '',
            mode: dir.mode,
            owner: dir.tenantOwned ? owner : undefined,
          }),
        );
      }
      for (const { path, kind } of p.mountpoints) {
        const parts = path.split('/');
        const name = parts.pop() as string;
        withFd(ensureDirPath(rwFd, parts, { displace: true, owner, shownRoot: '' }), (parentFd) => {
          const found = kindAt(parentFd, name);
          if (found === kind) return;
          if (found !== 'missing') displace(parentFd, name);
          if (kind === 'file') {
            writeNewFileAt(parentFd, name, '', 0o644, owner);
          } else {
            fs.mkdirSync(at(parentFd, name), { mode: 0o755 });
            if (owner) fs.lchownSync(at(parentFd, name), owner.uid, owner.gid);
          }
        });
      }
    } finally {
      closeQuietly(rwFd);
    }
  });
  for (const m of plan.mounts) {
    if (m.type === 'bind' && m.source !== p.rwRoot) closeQuietly(openPlannedSource(m.source));
  }
}
