import { BerthError } from '../../base/errors.js';

/** The engine's failures in berth's error codes (only the docker files call the engine). */

export interface EngineErrorShape {
  statusCode?: number;
  code?: string;
  json?: { message?: string };
  message?: string;
}

export function engineMessage(err: unknown): string {
  const e = (err ?? {}) as EngineErrorShape;
  return e.json?.message ?? e.message ?? String(err);
}

export function translateEngineError(err: unknown, context: { image?: string } = {}): BerthError {
  if (err instanceof BerthError) return err;
  const e = (err ?? {}) as EngineErrorShape;
  const text = engineMessage(err);
  if (e.code === 'ECONNREFUSED' || e.code === 'ENOENT' || e.code === 'EACCES' || e.code === 'ECONNRESET') {
    return new BerthError('ENGINE_UNAVAILABLE', `no Docker engine answers (${e.code})`, {
      hint: 'start one: "make run" does it on Debian as root, or "sudo dockerd &"; berth honours DOCKER_HOST',
    });
  }
  if (e.statusCode === 404 && context.image && /image/i.test(text)) {
    return new BerthError('IMAGE_MISSING', `image ${context.image} is not on this engine`, {
      hint: 'build it with "berth images build"',
    });
  }
  if (/unknown (or invalid )?runtime/i.test(text)) {
    return new BerthError('RUNTIME_MISSING', `the engine has no such runtime: ${text.trim()}`, {
      hint: 'register it with the engine (docs/security.md, "Stronger isolation: gVisor"), or choose another with "berth project update <name> --runtime runc"',
    });
  }
  return new BerthError('RUN_FAILED', `the engine refused: ${text.trim()}`, {}, { cause: err });
}
