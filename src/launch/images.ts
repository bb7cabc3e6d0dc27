/**
 * Images, apart from the launcher: an engine on berth's host builds and imports them; a cluster
 * only runs what a registry holds (its ImageStore can answer `exists` and refuse the rest).
 */

export interface ImageFacts {
  id: string;
  labels: Record<string, string>;
  sizeBytes: number;
}

export interface BuildOptions {
  context: NodeJS.ReadableStream;
  tag: string;
  buildArgs?: Record<string, string>;
  onProgress?: (line: string) => void;
}

export interface ImageStore {
  exists(image: string): Promise<boolean>;
  /** The image's id, labels and size; undefined when the engine has no such image. */
  inspect(image: string): Promise<ImageFacts | undefined>;
  /** Build a context (a tar stream with a Dockerfile) into `tag`. */
  build(options: BuildOptions): Promise<void>;
  /** `docker import`: a root filesystem tar file becomes the image `tag`. */
  importTar(file: string, tag: string): Promise<void>;
}
