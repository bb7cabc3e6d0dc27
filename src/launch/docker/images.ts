import Docker from 'dockerode';
import { BerthError } from '../../base/errors.js';
import { translateEngineError } from './errors.js';
import type { ImageStore } from '../images.js';

/** The ImageStore of a Docker engine: thin, like docker.ts. */
export function createDockerImages(docker: Docker = new Docker()): ImageStore {
  const follow = (stream: NodeJS.ReadableStream, onEvent?: (event: { stream?: string; status?: string; error?: string }) => void) =>
    new Promise<void>((resolve, reject) => {
      docker.modem.followProgress(
        stream,
        (err: Error | null, events: Array<{ error?: string }>) => {
          const failed = err?.message ?? events.find((e) => e.error)?.error;
          if (failed) reject(new Error(failed.trim()));
          else resolve();
        },
        onEvent,
      );
    });

  const inspect: ImageStore['inspect'] = async (image) => {
    try {
      const info = await docker.getImage(image).inspect();
      return { id: info.Id, labels: info.Config?.Labels ?? {}, sizeBytes: info.Size };
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) return undefined;
      throw translateEngineError(err);
    }
  };

  return {
    inspect,
    exists: async (image) => (await inspect(image)) !== undefined,

    async build({ context, tag, buildArgs, onProgress }) {
      let stream: NodeJS.ReadableStream;
      try {
        stream = await docker.buildImage(context, { t: tag, buildargs: buildArgs, rm: true, forcerm: true });
      } catch (err) {
        throw translateEngineError(err);
      }
      await follow(stream, (event) => {
        const line = (event.stream ?? event.status ?? event.error ?? '').trimEnd();
        if (line) onProgress?.(line);
      }).catch((err: Error) => {
        throw new BerthError('RUN_FAILED', `building ${tag} failed: ${err.message}`);
      });
    },

    async importTar(file, tag) {
      const [repo, version] = splitTag(tag);
      try {
        await follow(await docker.importImage(file, { repo, tag: version }));
      } catch (err) {
        throw translateEngineError(err);
      }
    },
  };
}

/** "repo/name:tag" → ["repo/name", "tag"]; a colon before the last slash is a registry port. */
function splitTag(tag: string): [string, string] {
  const colon = tag.lastIndexOf(':');
  return colon > tag.lastIndexOf('/') ? [tag.slice(0, colon), tag.slice(colon + 1)] : [tag, 'latest'];
}
