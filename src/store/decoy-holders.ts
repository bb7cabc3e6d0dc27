import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { readdirIfExists } from '../fs/dir.js';
import { readJsonFile } from '../fs/json-file.js';
import { atomicWriteFile } from '../fs/tree.js';

/**
 * The tenants whose containers were given decoy credentials (outbound/honeytokens.ts): berth's
 * own API looks for their decoys, and a request naming no tenant must know whose to look for. One
 * file per (project, tenant), named by a digest (never the key), in berth's private state: it
 * outlives a restart and the tenant's sessions (a copy taken in an earlier run still trips), every
 * berth process of the home sees it (`watch`), and forgetting the tenant removes it.
 */
const HolderSchema = z.object({ project: z.string(), tenant: z.string() }).strict();
export type DecoyHolder = z.infer<typeof HolderSchema>;

const NAME = /^[0-9a-f]{64}\.json$/;

export function openDecoyHolders(stateDir: string) {
  const dir = join(stateDir, 'decoy-holders');
  const idOf = (project: string, tenant: string) => createHash('sha256').update(`${project}\0${tenant}`).digest('hex');
  const read = (name: string): DecoyHolder | undefined => (NAME.test(name) ? readJsonFile(join(dir, name), HolderSchema) : undefined);
  return {
    /** The digest a holder is known by (its file's name, without .json). */
    idOf,
    /** Written once (a holder already there is left as it is). */
    add(project: string, tenant: string): void {
      const file = join(dir, `${idOf(project, tenant)}.json`);
      if (fs.existsSync(file)) return;
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      atomicWriteFile(file, JSON.stringify({ project, tenant }), 0o600);
    },
    remove(project: string, tenant: string): void {
      fs.rmSync(join(dir, `${idOf(project, tenant)}.json`), { force: true });
    },
    list: (): Array<DecoyHolder & { id: string }> =>
      readdirIfExists(dir).flatMap((name) => {
        const h = read(name);
        return h ? [{ ...h, id: name.slice(0, -5) }] : [];
      }),
    /**
     * Told of each holder added or removed by any process of this home (`holder` undefined: removed),
     * from the directory's change events; never throws. Returns the way to stop.
     */
    watch(onChange: (id: string, holder: DecoyHolder | undefined) => void): () => void {
      let watcher: fs.FSWatcher | undefined;
      try {
        if (!fs.existsSync(dir)) fs.mkdirSync(dir, { mode: 0o700 }); // never the state directory itself: a home removed stays removed
        watcher = fs.watch(dir, { persistent: false }, (_event, name) => {
          if (typeof name !== 'string' || !NAME.test(name)) return; // a writer's temporary file
          try {
            onChange(name.slice(0, -5), read(name));
          } catch {
            // a holder file cut short by a crash: left as it is, never thrown at the watcher
          }
        });
        watcher.on('error', () => watcher?.close()); // the home is gone
      } catch {
        return () => undefined; // no state directory (a home being removed): nothing to watch
      }
      return () => watcher?.close();
    },
  };
}

export type DecoyHolders = ReturnType<typeof openDecoyHolders>;
