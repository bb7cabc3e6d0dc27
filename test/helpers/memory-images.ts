import { BerthError } from '../../src/base/errors.js';
import type { ImageFacts, ImageStore } from '../../src/launch/images.js';

/** An ImageStore in memory: it has the images it is given and builds nothing (the unit tier has no engine). */
export function createMemoryImages(tags: string[] = ['berth/shell:latest', 'berth/agent:latest']): ImageStore {
  const have = new Map<string, ImageFacts>(
    tags.map((tag, i) => [tag, { id: `sha256:${String(i).padStart(64, '0')}`, labels: {}, sizeBytes: 0 }]),
  );
  const refuse = async (): Promise<never> => {
    throw new BerthError('LAUNCHER_UNSUPPORTED', 'this image store builds and imports nothing');
  };
  return {
    exists: async (image) => have.has(image),
    inspect: async (image) => have.get(image),
    build: refuse,
    importTar: refuse,
  };
}
