// Test helper: writes a token file with the raw HDF5 API, bypassing zt's writer (which
// refuses bad contents), to feed bad inputs to the real `zt` binary.
//   zt_test_make_token_file OUT.h5 VOCAB [ID ...]
// With ZT_TEST_ROW_LEN=N in the environment: instruction data in rows of N tokens whose
// /loss_mask is 0 everywhere (no target at all).
#include <hdf5.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUT.h5 VOCAB [ID ...]\n", argv[0]);
    return 2;
  }
  const unsigned vocab = static_cast<unsigned>(std::strtoul(argv[2], nullptr, 10));
  std::vector<unsigned> ids;
  for (int i = 3; i < argc; ++i) ids.push_back(static_cast<unsigned>(std::strtoul(argv[i], nullptr, 10)));
  const hid_t f = H5Fcreate(argv[1], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) return 1;
  const hsize_t n = ids.size();
  const hid_t space = H5Screate_simple(1, &n, nullptr);
  const hid_t d = H5Dcreate2(f, "tokens", H5T_STD_U16LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (d < 0) return 1;
  if (n > 0 && H5Dwrite(d, H5T_NATIVE_UINT, H5S_ALL, H5S_ALL, H5P_DEFAULT, ids.data()) < 0) return 1;
  const hid_t scalar = H5Screate(H5S_SCALAR);
  if (const char* row = std::getenv("ZT_TEST_ROW_LEN")) {
    const unsigned row_len = static_cast<unsigned>(std::strtoul(row, nullptr, 10));
    const std::vector<unsigned char> mask(ids.size(), 0);
    const hid_t m = H5Dcreate2(f, "loss_mask", H5T_STD_U8LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (m < 0 || (n > 0 && H5Dwrite(m, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, mask.data()) < 0)) return 1;
    H5Dclose(m);
    const hid_t r = H5Acreate2(f, "row_len", H5T_STD_U32LE, scalar, H5P_DEFAULT, H5P_DEFAULT);
    if (r < 0 || H5Awrite(r, H5T_NATIVE_UINT, &row_len) < 0) return 1;
    H5Aclose(r);
  }
  const hid_t a = H5Acreate2(f, "vocab_size", H5T_STD_U32LE, scalar, H5P_DEFAULT, H5P_DEFAULT);
  if (a < 0 || H5Awrite(a, H5T_NATIVE_UINT, &vocab) < 0) return 1;
  const hid_t str = H5Tcopy(H5T_C_S1);
  H5Tset_size(str, 5);
  const hid_t t = H5Acreate2(f, "tokenizer", str, scalar, H5P_DEFAULT, H5P_DEFAULT);
  if (t < 0 || H5Awrite(t, str, "bytes") < 0) return 1;
  H5Aclose(t);
  H5Tclose(str);
  H5Aclose(a);
  H5Sclose(scalar);
  H5Dclose(d);
  H5Sclose(space);
  return H5Fclose(f) < 0 ? 1 : 0;
}
