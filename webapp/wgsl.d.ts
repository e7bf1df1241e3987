// esbuild imports WGSL sources as text (loader "text"); this tells tsc so.
declare module "*.wgsl" {
  const source: string;
  export default source;
}
