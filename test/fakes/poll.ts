/**
 * The fakes' `waitFor`: polls `pred` every 10 ms and resolves with its first truthy value; a
 * throw from `pred` rejects at once; past `timeoutMs`, rejects naming the wait.
 */
export function pollUntil<T>(pred: () => T | undefined | null | false | 0 | '', timeoutMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const deadline = Date.now() + timeoutMs;
    const tick = (): void => {
      let v;
      try {
        v = pred();
      } catch (e) {
        reject(e as Error);
        return;
      }
      if (v) resolve(v as T);
      else if (Date.now() >= deadline) reject(new Error(`waitFor: condition not met within ${timeoutMs} ms`));
      else setTimeout(tick, 10);
    };
    tick();
  });
}
