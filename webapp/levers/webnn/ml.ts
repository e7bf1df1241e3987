// The share of the WebNN API (https://www.w3.org/TR/webnn/) this lever uses, typed here because
// TypeScript's DOM library has none yet. Current spec names only: MLTensor, dispatch and
// readTensor (compute() is gone), and createContext without deviceType (removed).

export type MLDataType = "float32" | "int32";

export interface MLOperandDescriptor {
  dataType: MLDataType;
  shape: number[];
}

export interface MLOperand {
  readonly dataType: MLDataType;
  readonly shape: readonly number[];
}

/** The builder subset the forward graph is written against (graph.ts); fake-ml.ts implements it on the CPU. */
export interface MLGraphBuilderLike {
  input(name: string, descriptor: MLOperandDescriptor): MLOperand;
  constant(descriptor: MLOperandDescriptor, buffer: Float32Array | Int32Array): MLOperand;
  add(a: MLOperand, b: MLOperand): MLOperand;
  mul(a: MLOperand, b: MLOperand): MLOperand;
  matmul(a: MLOperand, b: MLOperand): MLOperand;
  gather(input: MLOperand, indices: MLOperand, options?: { axis?: number }): MLOperand;
  layerNormalization(input: MLOperand, options: { scale: MLOperand; bias: MLOperand; axes: number[]; epsilon: number }): MLOperand;
  gelu(input: MLOperand): MLOperand;
  softmax(input: MLOperand, axis: number): MLOperand;
  reshape(input: MLOperand, newShape: number[]): MLOperand;
  transpose(input: MLOperand, options?: { permutation?: number[] }): MLOperand;
  build(outputs: Record<string, MLOperand>): Promise<MLGraph>;
}

/** Made by build(), run by dispatch(). */
export interface MLGraph {
  destroy?(): void;
}
/** Device memory that dispatch() reads and writes. */
export interface MLTensor {
  destroy?(): void;
}

/** What opSupportLimits() says of one operand of one op. */
export interface MLTensorLimits {
  dataTypes: string[];
  rankRange: { min: number; max: number };
}

export type MLOpSupportLimits = Record<string, unknown>;

export interface MLContextLike {
  opSupportLimits(): MLOpSupportLimits;
  createTensor(descriptor: MLOperandDescriptor & { readable?: boolean; writable?: boolean }): Promise<MLTensor>;
  writeTensor(tensor: MLTensor, data: Float32Array | Int32Array): void;
  dispatch(graph: MLGraph, inputs: Record<string, MLTensor>, outputs: Record<string, MLTensor>): void;
  readTensor(tensor: MLTensor): Promise<ArrayBuffer>;
  destroy?(): void;
}

/** navigator.ml, where a browser has it. */
export interface MLLike {
  createContext(options: { powerPreference: "default" | "high-performance" | "low-power" }): Promise<MLContextLike>;
}

/** Makes a builder for a context: `new MLGraphBuilder(context)` in a browser, the fake's in tests. */
export type NewBuilder = (context: MLContextLike) => MLGraphBuilderLike;
