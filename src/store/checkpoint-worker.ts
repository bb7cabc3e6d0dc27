import { parentPort } from 'node:worker_threads';
import { isBerthError } from '../base/errors.js';
import { copyInto, dropSessionCheckpoints, manifestCache, restoreCheckpoint, takeCheckpoint } from './checkpoints.js';
import type { CheckpointCall } from './checkpoint-thread.js';

/**
 * The thread berth's checkpoint copies run on (checkpoint-thread.ts starts it): the copies are
 * synchronous walks by descriptor, and here they block no one's event loop. One call at a time,
 * in the order sent; the manifests it read stay cached for the next checkpoint. This file is a
 * thread's entry point: it listens as soon as it is loaded.
 */
const cache = manifestCache();

function answer(call: CheckpointCall): unknown {
  switch (call.op) {
    case 'take':
      return takeCheckpoint(call.src, call.bounds, call.about, cache);
    case 'restore':
      return restoreCheckpoint(call.target, call.checkpoint);
    case 'copyInto':
      return copyInto(call.from, call.to);
    case 'dropSession':
      return dropSessionCheckpoints(call.project, call.tenantKey, call.session);
  }
}

parentPort?.on('message', (msg: { seq: number; call: CheckpointCall }) => {
  try {
    parentPort?.postMessage({ seq: msg.seq, ok: true, value: answer(msg.call) });
  } catch (err) {
    const error = isBerthError(err)
      ? { berth: true, code: err.code, message: err.message, details: err.details }
      : { berth: false, message: err instanceof Error ? err.message : String(err), code: (err as { code?: unknown }).code };
    parentPort?.postMessage({ seq: msg.seq, ok: false, error });
  }
});
