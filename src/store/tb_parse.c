/* store/tb_parse: the reader of TensorBoard event files (tb_int.h): TFRecord framing, both CRCs
 * checked, each record's tensorboard.Event decoded by protobuf-c from the trimmed upstream .proto
 * files (src/store/proto/, generated at build time), and its scalars kept — simple_value (what
 * torch.utils.tensorboard's add_scalar writes) and TF2's 0-d float or double tensors of the scalars
 * plugin — with the HParams plugin's session_start_info as params. Everything else is counted by
 * kind. Pure and fuzzed (tests/fuzz/fuzz_tb_parse.c): no recursion (the trimmed messages nest three
 * deep at most and none holds itself), every length checked against what is left. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/tb_int.h"
#include "tensorboard/compat/proto/event.pb-c.h"
#include "tensorboard/plugins/hparams/plugin_data.pb-c.h"

/* CRC32C (Castagnoli, reflected polynomial 0x82f63b78), the table of each byte's remainder. */
static const uint32_t crc_table[256] = {
    0x00000000, 0xf26b8303, 0xe13b70f7, 0x1350f3f4, 0xc79a971f, 0x35f1141c, 0x26a1e7e8, 0xd4ca64eb, 0x8ad958cf,
    0x78b2dbcc, 0x6be22838, 0x9989ab3b, 0x4d43cfd0, 0xbf284cd3, 0xac78bf27, 0x5e133c24, 0x105ec76f, 0xe235446c,
    0xf165b798, 0x030e349b, 0xd7c45070, 0x25afd373, 0x36ff2087, 0xc494a384, 0x9a879fa0, 0x68ec1ca3, 0x7bbcef57,
    0x89d76c54, 0x5d1d08bf, 0xaf768bbc, 0xbc267848, 0x4e4dfb4b, 0x20bd8ede, 0xd2d60ddd, 0xc186fe29, 0x33ed7d2a,
    0xe72719c1, 0x154c9ac2, 0x061c6936, 0xf477ea35, 0xaa64d611, 0x580f5512, 0x4b5fa6e6, 0xb93425e5, 0x6dfe410e,
    0x9f95c20d, 0x8cc531f9, 0x7eaeb2fa, 0x30e349b1, 0xc288cab2, 0xd1d83946, 0x23b3ba45, 0xf779deae, 0x05125dad,
    0x1642ae59, 0xe4292d5a, 0xba3a117e, 0x4851927d, 0x5b016189, 0xa96ae28a, 0x7da08661, 0x8fcb0562, 0x9c9bf696,
    0x6ef07595, 0x417b1dbc, 0xb3109ebf, 0xa0406d4b, 0x522bee48, 0x86e18aa3, 0x748a09a0, 0x67dafa54, 0x95b17957,
    0xcba24573, 0x39c9c670, 0x2a993584, 0xd8f2b687, 0x0c38d26c, 0xfe53516f, 0xed03a29b, 0x1f682198, 0x5125dad3,
    0xa34e59d0, 0xb01eaa24, 0x42752927, 0x96bf4dcc, 0x64d4cecf, 0x77843d3b, 0x85efbe38, 0xdbfc821c, 0x2997011f,
    0x3ac7f2eb, 0xc8ac71e8, 0x1c661503, 0xee0d9600, 0xfd5d65f4, 0x0f36e6f7, 0x61c69362, 0x93ad1061, 0x80fde395,
    0x72966096, 0xa65c047d, 0x5437877e, 0x4767748a, 0xb50cf789, 0xeb1fcbad, 0x197448ae, 0x0a24bb5a, 0xf84f3859,
    0x2c855cb2, 0xdeeedfb1, 0xcdbe2c45, 0x3fd5af46, 0x7198540d, 0x83f3d70e, 0x90a324fa, 0x62c8a7f9, 0xb602c312,
    0x44694011, 0x5739b3e5, 0xa55230e6, 0xfb410cc2, 0x092a8fc1, 0x1a7a7c35, 0xe811ff36, 0x3cdb9bdd, 0xceb018de,
    0xdde0eb2a, 0x2f8b6829, 0x82f63b78, 0x709db87b, 0x63cd4b8f, 0x91a6c88c, 0x456cac67, 0xb7072f64, 0xa457dc90,
    0x563c5f93, 0x082f63b7, 0xfa44e0b4, 0xe9141340, 0x1b7f9043, 0xcfb5f4a8, 0x3dde77ab, 0x2e8e845f, 0xdce5075c,
    0x92a8fc17, 0x60c37f14, 0x73938ce0, 0x81f80fe3, 0x55326b08, 0xa759e80b, 0xb4091bff, 0x466298fc, 0x1871a4d8,
    0xea1a27db, 0xf94ad42f, 0x0b21572c, 0xdfeb33c7, 0x2d80b0c4, 0x3ed04330, 0xccbbc033, 0xa24bb5a6, 0x502036a5,
    0x4370c551, 0xb11b4652, 0x65d122b9, 0x97baa1ba, 0x84ea524e, 0x7681d14d, 0x2892ed69, 0xdaf96e6a, 0xc9a99d9e,
    0x3bc21e9d, 0xef087a76, 0x1d63f975, 0x0e330a81, 0xfc588982, 0xb21572c9, 0x407ef1ca, 0x532e023e, 0xa145813d,
    0x758fe5d6, 0x87e466d5, 0x94b49521, 0x66df1622, 0x38cc2a06, 0xcaa7a905, 0xd9f75af1, 0x2b9cd9f2, 0xff56bd19,
    0x0d3d3e1a, 0x1e6dcdee, 0xec064eed, 0xc38d26c4, 0x31e6a5c7, 0x22b65633, 0xd0ddd530, 0x0417b1db, 0xf67c32d8,
    0xe52cc12c, 0x1747422f, 0x49547e0b, 0xbb3ffd08, 0xa86f0efc, 0x5a048dff, 0x8ecee914, 0x7ca56a17, 0x6ff599e3,
    0x9d9e1ae0, 0xd3d3e1ab, 0x21b862a8, 0x32e8915c, 0xc083125f, 0x144976b4, 0xe622f5b7, 0xf5720643, 0x07198540,
    0x590ab964, 0xab613a67, 0xb831c993, 0x4a5a4a90, 0x9e902e7b, 0x6cfbad78, 0x7fab5e8c, 0x8dc0dd8f, 0xe330a81a,
    0x115b2b19, 0x020bd8ed, 0xf0605bee, 0x24aa3f05, 0xd6c1bc06, 0xc5914ff2, 0x37faccf1, 0x69e9f0d5, 0x9b8273d6,
    0x88d28022, 0x7ab90321, 0xae7367ca, 0x5c18e4c9, 0x4f48173d, 0xbd23943e, 0xf36e6f75, 0x0105ec76, 0x12551f82,
    0xe03e9c81, 0x34f4f86a, 0xc69f7b69, 0xd5cf889d, 0x27a40b9e, 0x79b737ba, 0x8bdcb4b9, 0x988c474d, 0x6ae7c44e,
    0xbe2da0a5, 0x4c4623a6, 0x5f16d052, 0xad7d5351,
};

uint32_t tb_masked_crc32c(const uint8_t *p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; i++)
    c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
  c ^= 0xffffffffu;
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static int say(char *err, size_t n, size_t off, const char *why) {
  snprintf(err, n, "offset %zu: %s", off, why);
  return -1;
}

static uint64_t le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void tb_run_done(struct tb_run *r) {
  if (!r)
    return;
  for (size_t i = 0; i < r->n_tags; i++) {
    free(r->tags[i]);
    free(r->plugins[i]);
  }
  for (size_t i = 0; i < 2 * r->n_params; i++)
    free(r->params[i]);
  free(r->tags);
  free(r->plugins);
  free(r->params);
  free(r->pts);
  memset(r, 0, sizeof *r);
}

static char *dup_str(const char *s, size_t max) {
  size_t n = strlen(s);
  char *d = n <= max ? malloc(n + 1) : NULL;
  if (d)
    memcpy(d, s, n + 1);
  return d;
}

/* The index of tag in r->tags, added when new (its plugin as this value's metadata says); -1 when
 * the tag is too long or there are too many, -2 out of memory. */
static int tag_index(struct tb_run *r, const char *tag, const char *plugin) {
  for (size_t k = 0; k < r->n_tags; k++) { /* from the one after the last found, round: O(1) in a loop's order */
    size_t i = (r->hint + k) % r->n_tags;
    if (!strcmp(r->tags[i], tag)) {
      if (!*r->plugins[i] && plugin && *plugin) { /* the first metadata that names its plugin */
        char *p = dup_str(strlen(plugin) <= 255 ? plugin : "?", 255);
        if (p) {
          free(r->plugins[i]);
          r->plugins[i] = p;
        }
      }
      r->hint = i + 1;
      return (int)i;
    }
  }
  if (strlen(tag) > TB_MAX_TAG || r->n_tags >= TB_MAX_TAGS)
    return -1;
  if (!(r->n_tags & (r->n_tags + 1))) { /* 0, 1, 3, 7...: grown to twice its size */
    size_t cap = 2 * (r->n_tags + 1);
    char **t = realloc(r->tags, cap * sizeof *t);
    if (t)
      r->tags = t;
    char **p = t ? realloc(r->plugins, cap * sizeof *p) : NULL;
    if (!p)
      return -2;
    r->plugins = p;
  }
  if (plugin && strlen(plugin) > 255)
    plugin = "?"; /* some plugin's, not the scalars' */
  char *t = dup_str(tag, TB_MAX_TAG), *p = dup_str(plugin ? plugin : "", 255);
  if (!t || !p) {
    free(t);
    free(p);
    return -2;
  }
  r->tags[r->n_tags] = t;
  r->plugins[r->n_tags] = p;
  return (int)r->n_tags++;
}

static int add_point(struct tb_run *r, uint32_t tag, double wall, int64_t step, double v) {
  if (!isfinite(v))
    return 0; /* missing is not zero */
  if (r->n_pts == r->cap_pts) {
    size_t cap = r->cap_pts ? 2 * r->cap_pts : 256;
    struct tb_point *p = r->n_pts < TB_MAX_POINTS ? realloc(r->pts, cap * sizeof *p) : NULL;
    if (!p)
      return -1;
    r->pts = p;
    r->cap_pts = cap;
  }
  r->pts[r->n_pts++] = (struct tb_point){.wall = wall, .step = step, .v = v, .tag = tag};
  return 0;
}

/* The value of a 0-d float or double tensor; 0 with it in *v, -1 when it is not one. */
static int tensor_scalar(const Tensorboard__TensorProto *t, double *v) {
  const Tensorboard__TensorShapeProto *s = t->tensor_shape;
  if (s && (s->n_dim || s->unknown_rank))
    return -1;
  if (t->dtype == TENSORBOARD__DATA_TYPE__DT_FLOAT) {
    if (t->n_float_val == 1)
      return *v = t->float_val[0], 0;
    if (t->n_float_val || t->tensor_content.len != 4)
      return -1;
    uint32_t b = le32(t->tensor_content.data);
    float f;
    memcpy(&f, &b, sizeof f);
    return *v = f, 0;
  }
  if (t->dtype == TENSORBOARD__DATA_TYPE__DT_DOUBLE) {
    if (t->n_double_val == 1)
      return *v = t->double_val[0], 0;
    if (t->n_double_val || t->tensor_content.len != 8)
      return -1;
    uint64_t b = le64(t->tensor_content.data);
    memcpy(v, &b, sizeof *v);
    return 0;
  }
  return -1;
}

static int add_param(struct tb_run *r, const char *key, const char *val) {
  if (strlen(key) > 255 || strlen(val) > TB_MAX_VALUE || r->n_params >= TB_MAX_PARAMS)
    return -1;
  for (size_t i = 0; i < r->n_params; i++)
    if (!strcmp(r->params[2 * i], key)) /* a later session's value replaces an earlier one */
      return 0;
  char **p = realloc(r->params, (2 * r->n_params + 2) * sizeof *p);
  if (!p)
    return -2;
  r->params = p;
  if (!(p[2 * r->n_params] = dup_str(key, 255)) || !(p[2 * r->n_params + 1] = dup_str(val, TB_MAX_VALUE))) {
    free(p[2 * r->n_params]);
    return -2;
  }
  r->n_params++;
  return 0;
}

/* The HParams plugin's content: a session_start_info's hparams become params; -1 when it does not
 * decode or has too many, -2 out of memory. */
static int hparams(struct tb_run *r, const ProtobufCBinaryData *content) {
  Tensorboard__Hparams__HParamsPluginData *d =
      tensorboard__hparams__hparams_plugin_data__unpack(NULL, content->len, content->data);
  if (!d)
    return -1;
  int rc = 0;
  const Tensorboard__Hparams__SessionStartInfo *s =
      d->data_case == TENSORBOARD__HPARAMS__HPARAMS_PLUGIN_DATA__DATA_SESSION_START_INFO ? d->session_start_info : NULL;
  for (size_t i = 0; s && !rc && i < s->n_hparams; i++) {
    const Google__Protobuf__Value *v = s->hparams[i]->value;
    char num[32];
    const char *val = NULL;
    if (v && v->kind_case == GOOGLE__PROTOBUF__VALUE__KIND_NUMBER_VALUE) {
      snprintf(num, sizeof num, "%.15g", v->number_value);
      if (strtod(num, NULL) != v->number_value) /* the shortest that reads back as itself */
        snprintf(num, sizeof num, "%.17g", v->number_value);
      val = num;
    } else if (v && v->kind_case == GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE) {
      val = v->string_value;
    } else if (v && v->kind_case == GOOGLE__PROTOBUF__VALUE__KIND_BOOL_VALUE) {
      val = v->bool_value ? "true" : "false";
    }
    if (val && s->hparams[i]->key)
      rc = add_param(r, s->hparams[i]->key, val);
  }
  tensorboard__hparams__hparams_plugin_data__free_unpacked(d, NULL);
  return rc;
}

static const char *plugin_of(const Tensorboard__Summary__Value *v) {
  return v->metadata && v->metadata->plugin_data ? v->metadata->plugin_data->plugin_name : NULL;
}

/* One summary value: a scalar kept, hparams kept, anything else counted. 0, -1 (a reason in
 * *why), -2 out of memory. */
static int summary_value(struct tb_run *r, const Tensorboard__Event *e, const Tensorboard__Summary__Value *v,
                         const char **why) {
  const char *plugin = plugin_of(v);
  double x;
  if (plugin && !strcmp(plugin, "hparams")) {
    int rc = hparams(r, &v->metadata->plugin_data->content);
    *why = "hparams that do not decode, or over 1024 of them";
    return rc;
  }
  switch (v->value_case) {
  case TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE:
  case TENSORBOARD__SUMMARY__VALUE__VALUE_TENSOR: {
    int is_simple = v->value_case == TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    if (!is_simple && tensor_scalar(v->tensor, &x)) {
      r->other[TB_TENSOR]++; /* text, a histogram of TF2, a plugin's tensor */
      return 0;
    }
    int k = tag_index(r, v->tag ? v->tag : "", plugin);
    *why = k == -1 ? "a tag over 159 bytes, or over 4096 tags" : "out of memory";
    if (k < 0)
      return k;
    if (!is_simple && *r->plugins[k] && strcmp(r->plugins[k], "scalars")) {
      r->other[TB_TENSOR]++; /* a 0-d tensor of another plugin */
      return 0;
    }
    *why = "over 20000000 points, or out of memory";
    return add_point(r, (uint32_t)k, e->wall_time, e->step, is_simple ? v->simple_value : x);
  }
  case TENSORBOARD__SUMMARY__VALUE__VALUE_IMAGE:
    return r->other[TB_IMAGE]++, 0;
  case TENSORBOARD__SUMMARY__VALUE__VALUE_HISTO:
  case TENSORBOARD__SUMMARY__VALUE__VALUE_OBSOLETE_OLD_STYLE_HISTOGRAM:
    return r->other[TB_HISTOGRAM]++, 0;
  case TENSORBOARD__SUMMARY__VALUE__VALUE_AUDIO:
    return r->other[TB_AUDIO]++, 0;
  default:
    return r->other[TB_OTHER]++, 0;
  }
}

/* One record's data: an Event. 0, or -1 with the reason. */
static int event(struct tb_run *r, const uint8_t *data, size_t len, size_t off, char *err, size_t errlen) {
  Tensorboard__Event *e = tensorboard__event__unpack(NULL, len, data);
  if (!e)
    return say(err, errlen, off, "the record is not a TensorBoard Event (its protobuf does not decode)");
  const char *why = NULL;
  int rc = 0;
  if (!isfinite(e->wall_time) || e->wall_time < 0 || e->wall_time > 9e9) {
    why = "an event's wall_time is not a time (0 to 9e9 seconds)";
  } else if (e->what_case == TENSORBOARD__EVENT__WHAT_FILE_VERSION && strncmp(e->file_version, "brain.Event:", 12)) {
    why = "a file_version that is not brain.Event:N (not a TensorBoard event file)";
  } else if (e->what_case == TENSORBOARD__EVENT__WHAT_SUMMARY) {
    for (size_t i = 0; !rc && i < e->summary->n_value; i++)
      rc = summary_value(r, e, e->summary->value[i], &why);
    if (!rc)
      why = NULL;
  } else if (e->what_case != TENSORBOARD__EVENT__WHAT_FILE_VERSION) {
    r->other[e->what_case == TENSORBOARD__EVENT__WHAT__NOT_SET ? TB_OTHER : TB_GRAPH]++;
  }
  if (!why) {
    r->wall_min = r->events && r->wall_min < e->wall_time ? r->wall_min : e->wall_time;
    r->wall_max = r->events && r->wall_max > e->wall_time ? r->wall_max : e->wall_time;
    r->events++;
  }
  tensorboard__event__free_unpacked(e, NULL);
  return why ? say(err, errlen, off, why) : 0;
}

int tb_parse_events(struct tb_run *r, const uint8_t *buf, size_t n, char *err, size_t errlen) {
  size_t off = 0;
  while (off < n) {
    char why[128];
    if (n - off < 12) {
      snprintf(why, sizeof why, "a record cut short (%zu of its 12 header bytes)", n - off);
      return say(err, errlen, off, why);
    }
    if (tb_masked_crc32c(buf + off, 8) != le32(buf + off + 8))
      return say(err, errlen, off, "the record's length fails its CRC (a damaged file)");
    uint64_t len = le64(buf + off);
    if (len > TB_MAX_RECORD)
      return say(err, errlen, off, "a record over 64 MiB");
    if (n - off - 12 < len + 4) {
      snprintf(why, sizeof why, "a record cut short (%llu bytes of data and its CRC, %zu left in the file)",
               (unsigned long long)len + 4, n - off - 12);
      return say(err, errlen, off, why);
    }
    if (tb_masked_crc32c(buf + off + 12, len) != le32(buf + off + 12 + len))
      return say(err, errlen, off, "the record's data fails its CRC (a damaged file)");
    if (event(r, buf + off + 12, len, off, err, errlen))
      return -1;
    off += 12 + len + 4;
  }
  return 0;
}
