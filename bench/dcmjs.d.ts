// dcmjs ships no types; the benches use only what is declared here (bench/dicom-images.ts).
declare module 'dcmjs' {
  interface DicomDict {
    dict: Record<string, unknown>;
    /** The Part 10 file; `fragmentMultiframe: false` writes each frame of encapsulated pixel data as one fragment. */
    write(options?: { fragmentMultiframe?: boolean }): ArrayBuffer;
  }
  const dcmjs: {
    data: {
      DicomDict: new (meta: Record<string, unknown>) => DicomDict;
      DicomMetaDictionary: {
        denaturalizeDataset(dataset: Record<string, unknown>): Record<string, unknown>;
      };
    };
  };
  export default dcmjs;
}
