// A CPU test double of the WebNN subset the lever uses (ml.ts), in plain float32 maths, for the
// lever's tests where no browser runs WebNN (none here: content/docs/browser-notes.md). It
// records each op's operand types and ranks, so a test can hold graph.ts's NEEDS to them, and can
// be made to misbehave: an op's outputs scaled (a wrong kernel the gate must catch), dispatch
// throwing after some runs (and, as the spec's, on a tensor bound twice), createContext throwing, limits missing an op.

import type { MLContextLike, MLDataType, MLGraph, MLGraphBuilderLike, MLLike, MLOpSupportLimits, MLOperand, MLOperandDescriptor, MLTensor } from "./ml";

type Data = Float32Array | Int32Array;
type Inputs = Map<string, Data>;

class Node implements MLOperand {
  constructor(readonly dataType: MLDataType, readonly shape: readonly number[], readonly run: (inputs: Inputs, memo: Map<Node, Data>) => Data) {}
  value(inputs: Inputs, memo: Map<Node, Data>): Data {
    let v = memo.get(this);
    if (!v) memo.set(this, (v = this.run(inputs, memo)));
    return v;
  }
}

const size = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
const strides = (shape: readonly number[]) => shape.map((_, i) => size(shape.slice(i + 1)));

/** erf to about 1e-7 (Abramowitz and Stegun 7.1.26), ample against float32 logits. */
function erf(x: number): number {
  const t = 1 / (1 + 0.3275911 * Math.abs(x));
  const y = 1 - ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * Math.exp(-x * x);
  return x < 0 ? -y : y;
}

/** Every (op, operand) seen with its data type and the ranks used, as opSupportLimits() would list them. */
export type Usage = Map<string, { dataTypes: Set<string>; ranks: Set<number> }>;

export class FakeBuilder implements MLGraphBuilderLike {
  readonly usage: Usage = new Map();

  constructor(private fake: FakeContext) {}

  private use(op: string, operands: Record<string, MLOperand>): void {
    for (const [name, o] of Object.entries(operands)) {
      const key = `${op}.${name}`;
      const u = this.usage.get(key) ?? { dataTypes: new Set<string>(), ranks: new Set<number>() };
      u.dataTypes.add(o.dataType);
      u.ranks.add(o.shape.length);
      this.usage.set(key, u);
    }
  }

  /** A float32 op's result, scaled where the context was told to perturb this op. */
  private op(op: string, operands: Record<string, MLOperand>, shape: number[], f: (v: Data[]) => Float32Array): Node {
    const args = Object.values(operands) as Node[];
    const out = new Node("float32", shape, (inputs, memo) => {
      const r = f(args.map((a) => a.value(inputs, memo)));
      return this.fake.perturb === op ? r.map((v) => v * 1.05) : r;
    });
    this.use(op, { ...operands, output: out });
    return out;
  }

  input(name: string, d: MLOperandDescriptor): MLOperand {
    const node = new Node(d.dataType, d.shape, (inputs) => inputs.get(name)!);
    this.use("input", { input: node });
    return node;
  }

  constant(d: MLOperandDescriptor, buffer: Data): MLOperand {
    const copy = buffer.slice(); // the spec copies at the call: later changes to the buffer do not count
    const node = new Node(d.dataType, d.shape, () => copy);
    this.use("constant", { constant: node });
    return node;
  }

  private broadcast(op: string, a: MLOperand, b: MLOperand, f: (x: number, y: number) => number): MLOperand {
    const rank = Math.max(a.shape.length, b.shape.length);
    const pad = (s: readonly number[]) => [...Array(rank - s.length).fill(1), ...s];
    const sa = pad(a.shape), sb = pad(b.shape);
    const shape = sa.map((n, i) => Math.max(n, sb[i]));
    const [ta, tb, to] = [strides(sa), strides(sb), strides(shape)];
    return this.op(op, { a, b }, shape, ([x, y]) => {
      const out = new Float32Array(size(shape));
      for (let i = 0; i < out.length; i++) {
        let ia = 0, ib = 0;
        for (let d = 0; d < rank; d++) {
          const c = Math.floor(i / to[d]) % shape[d];
          ia += (sa[d] === 1 ? 0 : c) * ta[d];
          ib += (sb[d] === 1 ? 0 : c) * tb[d];
        }
        out[i] = f(x[ia], y[ib]);
      }
      return out;
    });
  }

  add(a: MLOperand, b: MLOperand): MLOperand {
    return this.broadcast("add", a, b, (x, y) => x + y);
  }

  mul(a: MLOperand, b: MLOperand): MLOperand {
    return this.broadcast("mul", a, b, (x, y) => x * y);
  }

  matmul(a: MLOperand, b: MLOperand): MLOperand {
    const [M, K] = a.shape.slice(-2), N = b.shape[b.shape.length - 1];
    const batch = a.shape.length === 3 ? a.shape[0] : 1;
    if (b.shape[b.shape.length - 2] !== K || a.shape.length !== b.shape.length) throw new Error(`matmul of ${a.shape} and ${b.shape}`);
    return this.op("matmul", { a, b }, [...a.shape.slice(0, -1), N], ([x, y]) => {
      const out = new Float32Array(batch * M * N);
      for (let s = 0; s < batch; s++) {
        for (let i = 0; i < M; i++) {
          for (let j = 0; j < N; j++) {
            let acc = 0;
            for (let k = 0; k < K; k++) acc += x[s * M * K + i * K + k] * y[s * K * N + k * N + j];
            out[s * M * N + i * N + j] = acc;
          }
        }
      }
      return out;
    });
  }

  gather(input: MLOperand, indices: MLOperand, options: { axis?: number } = {}): MLOperand {
    if ((options.axis ?? 0) !== 0 || input.shape.length !== 2) throw new Error("the fake gathers rows of a matrix only");
    const [N, C] = input.shape;
    return this.op("gather", { input, indices }, [...indices.shape, C], ([x, idx]) => {
      const out = new Float32Array(idx.length * C);
      idx.forEach((r, i) => {
        if (r < 0 || r >= N) throw new Error(`gather index ${r} outside [0, ${N})`);
        out.set(x.subarray(r * C, (r + 1) * C), i * C);
      });
      return out;
    });
  }

  layerNormalization(input: MLOperand, o: { scale: MLOperand; bias: MLOperand; axes: number[]; epsilon: number }): MLOperand {
    const C = input.shape[input.shape.length - 1];
    if (o.axes.length !== 1 || o.axes[0] !== input.shape.length - 1) throw new Error("the fake normalises over the last axis only");
    return this.op("layerNormalization", { input, scale: o.scale, bias: o.bias }, [...input.shape], ([x, w, b]) => {
      const out = new Float32Array(x.length);
      for (let r = 0; r < x.length / C; r++) {
        const row = x.subarray(r * C, (r + 1) * C) as Float32Array;
        const mean = row.reduce((s, v) => s + v, 0) / C;
        const variance = row.reduce((s, v) => s + (v - mean) ** 2, 0) / C;
        const rstd = 1 / Math.sqrt(variance + o.epsilon);
        for (let c = 0; c < C; c++) out[r * C + c] = (row[c] - mean) * rstd * w[c] + b[c];
      }
      return out;
    });
  }

  gelu(input: MLOperand): MLOperand {
    return this.op("gelu", { input }, [...input.shape], ([x]) => Float32Array.from(x, (v) => 0.5 * v * (1 + erf(v / Math.SQRT2))));
  }

  softmax(input: MLOperand, axis: number): MLOperand {
    const n = input.shape[input.shape.length - 1];
    if (axis !== input.shape.length - 1) throw new Error("the fake's softmax runs over the last axis only");
    return this.op("softmax", { input }, [...input.shape], ([x]) => {
      const out = new Float32Array(x.length);
      for (let r = 0; r < x.length / n; r++) {
        const row = x.subarray(r * n, (r + 1) * n) as Float32Array;
        const max = row.reduce((m, v) => Math.max(m, v), -Infinity);
        let sum = 0;
        for (let i = 0; i < n; i++) sum += out[r * n + i] = Math.exp(row[i] - max);
        for (let i = 0; i < n; i++) out[r * n + i] /= sum;
      }
      return out;
    });
  }

  reshape(input: MLOperand, newShape: number[]): MLOperand {
    if (size(newShape) !== size(input.shape)) throw new Error(`reshape of ${input.shape} to ${newShape}`);
    return this.op("reshape", { input }, newShape, ([x]) => Float32Array.from(x));
  }

  transpose(input: MLOperand, options: { permutation?: number[] } = {}): MLOperand {
    const rank = input.shape.length;
    const perm = options.permutation ?? [...Array(rank).keys()].reverse();
    const shape = perm.map((p) => input.shape[p]);
    const [ti, to] = [strides(input.shape), strides(shape)];
    return this.op("transpose", { input }, shape, ([x]) => {
      const out = new Float32Array(x.length);
      for (let i = 0; i < out.length; i++) {
        let from = 0;
        for (let d = 0; d < rank; d++) from += (Math.floor(i / to[d]) % shape[d]) * ti[perm[d]];
        out[i] = x[from];
      }
      return out;
    });
  }

  async build(outputs: Record<string, MLOperand>): Promise<MLGraph> {
    for (const o of Object.values(outputs)) this.use("output", { output: o });
    const graph: MLGraph & { outputs: Record<string, MLOperand> } = { outputs };
    return graph;
  }
}

interface FakeTensor extends MLTensor {
  descriptor: MLOperandDescriptor;
  data: Data;
}

export class FakeContext implements MLContextLike {
  dispatches = 0;
  /** Each dispatch's input names, in order. */
  inputs: string[][] = [];
  /** An op whose outputs come out 5% too large. */
  perturb: string | null = null;
  /** Dispatches that succeed before every later one throws (a lost device mid-sample). */
  failAfter = Infinity;
  limits: MLOpSupportLimits = everything();

  opSupportLimits(): MLOpSupportLimits {
    return this.limits;
  }

  async createTensor(d: MLOperandDescriptor): Promise<MLTensor> {
    const tensor: FakeTensor = { descriptor: d, data: d.dataType === "int32" ? new Int32Array(size(d.shape)) : new Float32Array(size(d.shape)) };
    return tensor;
  }

  writeTensor(tensor: MLTensor, data: Data): void {
    (tensor as FakeTensor).data.set(data);
  }

  dispatch(graph: MLGraph, inputs: Record<string, MLTensor>, outputs: Record<string, MLTensor>): void {
    if (++this.dispatches > this.failAfter) throw new DOMException("the fake context was lost", "InvalidStateError");
    // The spec's dispatch refuses a tensor bound twice, an input written as an output above all.
    const bound = [...Object.values(inputs), ...Object.values(outputs)];
    if (new Set(bound).size < bound.length) throw new TypeError("a tensor bound twice in one dispatch");
    this.inputs.push(Object.keys(inputs));
    const given: Inputs = new Map(Object.entries(inputs).map(([name, t]) => [name, (t as FakeTensor).data]));
    const memo = new Map<Node, Data>();
    const ops = (graph as { outputs: Record<string, Node> }).outputs;
    for (const [name, t] of Object.entries(outputs)) (t as FakeTensor).data.set(ops[name].value(given, memo));
  }

  async readTensor(tensor: MLTensor): Promise<ArrayBuffer> {
    return (tensor as FakeTensor).data.slice().buffer;
  }
}

/** opSupportLimits() of a context that offers float32 and int32 at ranks 0 to 4 for every op. */
export function everything(): MLOpSupportLimits {
  const any = () => ({ dataTypes: ["float32", "int32"], rankRange: { min: 0, max: 4 } });
  return new Proxy({}, {
    get: (_, op) => (["input", "constant", "output"].includes(String(op)) ? any() : new Proxy({}, { get: any })),
  });
}

/** navigator.ml's double: its context, or createContext's failure. */
export function fakeMl(context: FakeContext | Error): MLLike {
  return {
    createContext: async (options) => {
      if ("deviceType" in options) throw new TypeError("deviceType was removed from the spec");
      if (context instanceof Error) throw context;
      return context;
    },
  };
}

export const fakeBuilder = (context: MLContextLike) => new FakeBuilder(context as FakeContext);
