/**
 * A run counted in its session (SessionStore.countRun: a read-modify-write of the session's file,
 * with its fsync) while its container runs it rather than after it: once its container or exec
 * exists (`started`), on the event loop's next turn, so the engine's request goes out first. Read
 * then, so a level set or a host approved before is kept (and one set later keeps the count: each
 * writer reads the record it rewrites). A run that never got that far is counted at its end.
 * `done` settles once it is written, and fails as countRun did (a session deleted meanwhile).
 */
export function countWhileRunning(count: () => void): { started(): void; done(): Promise<void> } {
  let counted: Promise<void> | undefined;
  const start = () => {
    if (!counted) {
      counted = new Promise<void>((r) => setImmediate(r)).then(count);
      counted.catch(() => undefined); // its failure is done()'s
    }
    return counted;
  };
  return { started: () => void start(), done: start };
}
