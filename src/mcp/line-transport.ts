import type { Socket } from 'node:net';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { JSONRPCMessageSchema, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';

export interface LineBounds {
  maxRequestBytes: number;
  maxResponseBytes: number;
  inFlightPerConnection: number;
  maxUnreadBytes: number;
}

const isRequest = (m: unknown): m is { id: string | number; method: string } =>
  typeof m === 'object' && m !== null && 'method' in m && 'id' in m;
const isResponse = (m: JSONRPCMessage): m is JSONRPCMessage & { id: string | number } => 'id' in m && !('method' in m);

const TOO_LARGE = Symbol('too large');

/** A JSON-RPC error line berth writes itself (the SDK never sees the request). */
export function errorLine(id: string | number | null, code: number, message: string): string {
  return `${JSON.stringify({ jsonrpc: '2.0', id, error: { code, message } })}\n`;
}

/**
 * MCP's stdio framing (one JSON-RPC message per line) over a socket, with bounds: a request
 * line longer than maxRequestBytes ends the connection; at most inFlightPerConnection requests
 * are handed to the server at once; while that many are open, or the client has not read
 * maxUnreadBytes of answers, berth stops reading (the kernel then stops the sender). Each
 * answer is serialized once, and one bigger than maxResponseBytes is replaced by an error.
 * Batches (JSON arrays) are refused: MCP dropped them, and they would defeat the in-flight bound.
 */
export class LineTransport implements Transport {
  onmessage?: (message: JSONRPCMessage) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;

  private chunks: Buffer[] = [];
  private buffered = 0;
  private inFlight = 0;
  private inputEnded = false;
  private closed = false;
  /** Chunks known to hold no newline. */
  private scanned = 0;

  constructor(
    private readonly socket: Socket,
    private readonly bounds: LineBounds,
  ) {}

  async start(): Promise<void> {
    this.socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.socket.on('drain', () => this.pump());
    this.socket.on('end', () => {
      this.inputEnded = true;
      this.pump();
    });
    this.socket.on('close', () => this.finish());
    this.socket.on('error', () => this.socket.destroy());
    this.pump();
  }

  async send(message: JSONRPCMessage): Promise<void> {
    if (this.closed) return;
    // The JSON and its newline are written apart: "json + \n" would be one more copy of a 4 MiB
    // answer (a cons string, flattened by the byte count).
    const json = JSON.stringify(message);
    if (Buffer.byteLength(json) + 1 > this.bounds.maxResponseBytes && isResponse(message)) {
      this.socket.write(
        errorLine(message.id, -32000, `RESPONSE_TOO_LARGE: the answer is larger than ${this.bounds.maxResponseBytes} bytes`),
      );
    } else {
      this.socket.write(json);
      this.socket.write('\n');
    }
    if (isResponse(message)) {
      this.inFlight--;
      // The next request waits for the next turn of the event loop: one busy connection never
      // holds the process through many answers in a row (a health check gets in between).
      setImmediate(() => this.pump());
    }
  }

  async close(): Promise<void> {
    this.socket.destroy();
    this.finish();
  }

  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    this.chunks = [];
    this.onclose?.();
  }

  private onData(chunk: Buffer): void {
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    this.pump();
  }

  /** Hand complete lines to the server while the bounds allow; pause the socket otherwise. */
  private pump(): void {
    while (!this.closed && this.inFlight < this.bounds.inFlightPerConnection && this.socket.writableLength <= this.bounds.maxUnreadBytes) {
      const line = this.nextLine();
      if (line === undefined) break;
      if (line === TOO_LARGE) return this.refuseTooLarge();
      if (line.trim() !== '') this.dispatch(line);
    }
    if (this.closed) return;
    if (this.buffered > this.bounds.maxRequestBytes && this.newlineAt() === -1) return this.refuseTooLarge();
    const blocked = this.inFlight >= this.bounds.inFlightPerConnection || this.socket.writableLength > this.bounds.maxUnreadBytes;
    if (blocked) this.socket.pause();
    else this.socket.resume();
    // Everything asked before the client's half-close is answered, then the connection ends.
    if (this.inputEnded && this.inFlight === 0 && this.buffered === 0) this.socket.end();
  }

  private refuseTooLarge(): void {
    this.socket.end(errorLine(null, -32600, `REQUEST_TOO_LARGE: a request line is larger than ${this.bounds.maxRequestBytes} bytes`));
    this.finish();
  }

  /** Offset of the first newline in the buffer, or -1 (chunks already scanned are not scanned again). */
  private newlineAt(): number {
    let offset = 0;
    for (const [i, chunk] of this.chunks.entries()) {
      if (i >= this.scanned) {
        const at = chunk.indexOf(10);
        if (at !== -1) return offset + at;
        this.scanned = i + 1;
      }
      offset += chunk.length;
    }
    return -1;
  }

  private nextLine(): string | typeof TOO_LARGE | undefined {
    const end = this.newlineAt();
    if (end === -1 && !(this.inputEnded && this.buffered > 0)) return undefined;
    const all = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks, this.buffered);
    const stop = end === -1 ? all.length : end; // a last line without a newline still counts
    const rest = all.subarray(Math.min(stop + 1, all.length));
    this.chunks = rest.length ? [rest] : [];
    this.buffered = rest.length;
    this.scanned = 0;
    if (stop > this.bounds.maxRequestBytes) return TOO_LARGE;
    return all.toString('utf8', 0, stop);
  }

  private dispatch(line: string): void {
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      this.socket.write(errorLine(null, -32700, 'Parse error: not JSON'));
      return;
    }
    if (Array.isArray(message)) {
      this.socket.write(errorLine(null, -32600, 'Invalid Request: batches are not supported on this socket; send one message per line'));
      return;
    }
    if (!JSONRPCMessageSchema.safeParse(message).success) {
      const id = (message as { id?: unknown } | null)?.id;
      this.socket.write(
        errorLine(typeof id === 'string' || typeof id === 'number' ? id : null, -32600, 'Invalid Request: not a JSON-RPC 2.0 message'),
      );
      return;
    }
    if (isRequest(message)) this.inFlight++;
    this.onmessage?.(message as JSONRPCMessage);
  }
}
