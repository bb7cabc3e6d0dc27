import Docker from 'dockerode';
import { translateEngineError } from './docker.js';

/**
 * Image calls beside the launch Engine (inspect with labels, import of a root
 * filesystem tar): thin, like docker.ts.
 */
export interface ImageFacts {
  id: string;
  labels: Record<string, string>;
  sizeBytes: number;
}

export interface EngineImages {
  /** The image's id, labels and size; undefined when the engine has no such image. */
  inspect(image: string): Promise<ImageFacts | undefined>;
  /** `docker import`: a root filesystem tar file becomes the image `tag`. */
  importTar(file: string, tag: string): Promise<void>;
}

export function createEngineImages(docker: Docker = new Docker()): EngineImages {
  return {
    async inspect(image) {
      try {
        const info = await docker.getImage(image).inspect();
        return { id: info.Id, labels: info.Config?.Labels ?? {}, sizeBytes: info.Size };
      } catch (err) {
        if ((err as { statusCode?: number }).statusCode === 404) return undefined;
        throw translateEngineError(err);
      }
    },

    async importTar(file, tag) {
      const [repo, version] = splitTag(tag);
      try {
        const stream = await docker.importImage(file, { repo, tag: version });
        await new Promise<void>((resolve, reject) => {
          docker.modem.followProgress(stream, (err: Error | null, events: Array<{ error?: string }>) => {
            const failed = err?.message ?? events.find((e) => e.error)?.error;
            if (failed) reject(new Error(failed));
            else resolve();
          });
        });
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
