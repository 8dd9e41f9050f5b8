/* collect/rocm_smi_api: AMD's ROCm SMI library (librocm_smi64.so), loaded at run time with dlopen
 * like NVML (collect/nvml_api.h), so gpuscope builds and runs without ROCm installed. The types and
 * constants below are our own declarations of what rocm_smi.h defines, under the same names; their
 * sizes, offsets and values, and every entry point's type, are checked against Debian's
 * librocm-smi-dev header (ROCm 5.x) and upstream ROCm/rocm_smi_lib's (6.x/7.x) by
 * tools/rocm-smi-abi/check.sh. The one struct whose layout differs between them,
 * rsmi_frequencies_t, is read into a buffer large enough for either and decoded by its shape
 * (rocm_smi_api_clock_mhz). */
#ifndef GS_COLLECT_ROCM_SMI_API_H
#define GS_COLLECT_ROCM_SMI_API_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  RSMI_STATUS_SUCCESS = 0x0,
  RSMI_STATUS_INVALID_ARGS,
  RSMI_STATUS_NOT_SUPPORTED,
  RSMI_STATUS_FILE_ERROR,
  RSMI_STATUS_PERMISSION,
  RSMI_STATUS_OUT_OF_RESOURCES,
  RSMI_STATUS_INTERNAL_EXCEPTION,
  RSMI_STATUS_INPUT_OUT_OF_BOUNDS,
  RSMI_STATUS_INIT_ERROR,
  RSMI_STATUS_NOT_YET_IMPLEMENTED,
  RSMI_STATUS_NOT_FOUND,
  RSMI_STATUS_INSUFFICIENT_SIZE,
  RSMI_STATUS_INTERRUPT,
  RSMI_STATUS_UNEXPECTED_SIZE,
  RSMI_STATUS_NO_DATA,
  RSMI_STATUS_UNEXPECTED_DATA,
  RSMI_STATUS_BUSY,
  RSMI_STATUS_REFCOUNT_OVERFLOW,
  RSMI_STATUS_UNKNOWN_ERROR = 0xFFFFFFFF,
} rsmi_status_t;

typedef enum { RSMI_MEM_TYPE_VRAM = 0 } rsmi_memory_type_t;
typedef enum { RSMI_TEMP_CURRENT = 0 } rsmi_temperature_metric_t;
enum { RSMI_TEMP_TYPE_EDGE = 0, RSMI_TEMP_TYPE_JUNCTION = 1, RSMI_TEMP_TYPE_MEMORY = 2 }; /* sensor_type */
typedef enum { RSMI_CLK_TYPE_SYS = 0 } rsmi_clk_type_t;
/* rocm_smi.h's rsmi_gpu_block_t is an enum with a 64-bit member (RSMI_GPU_BLOCK_RESERVED, bit 63), so
 * it is 8 bytes: ISO C's enums stop at int, hence a uint64_t here. */
typedef uint64_t rsmi_gpu_block_t;
enum { RSMI_GPU_BLOCK_UMC = 0x1, RSMI_GPU_BLOCK_GFX = 0x4 };

typedef struct {
  uint64_t correctable_err;
  uint64_t uncorrectable_err;
} rsmi_error_count_t;

typedef struct {
  uint32_t process_id;
  uint32_t pasid;
  uint64_t vram_usage; /* bytes */
  uint64_t sdma_usage; /* µs */
  uint32_t cu_occupancy;
} rsmi_process_info_t;

/* rsmi_frequencies_t: ROCm 5.x {u32 num_supported, current; u64 frequency[32]} (264 bytes); ROCm 6
 * and later {bool has_deep_sleep; u32 num_supported, current; u64 frequency[33]} (280 bytes). Only
 * passed by pointer here: the buffer is ROCM_SMI_FREQ_BUF bytes. */
typedef struct rsmi_frequencies rsmi_frequencies_t;
#define ROCM_SMI_FREQ_BUF 512
/* The two layouts, for the ABI check and the decoder. */
struct rsmi_freq_v5 {
  uint32_t num_supported, current;
  uint64_t frequency[32];
};
struct rsmi_freq_v6 {
  _Bool has_deep_sleep;
  uint32_t num_supported, current;
  uint64_t frequency[33];
};

/* rsmi_gpu_metrics_t (rsmi_dev_gpu_metrics_info_get): the firmware's metrics table as the library
 * hands it over. Its header is the kernel's (format 1 on discrete GPUs; content revision 1..6+, which
 * says which fields the firmware fills); the struct around it is the library's, and grew: ROCm 5.x's
 * is the v1.1 fields alone (96 bytes, struct rsmi_metrics_v5), ROCm 6.0 appended the v1.2-v1.4
 * fields, 6.1 the v1.5 ones, 6.3 (ROCm/rocm_smi_lib's "GPU metrics 1.6") the v1.6 ones, each at the
 * end (struct rsmi_metrics_v6 declares them up to the last one read). Only passed by pointer: the
 * buffer is ROCM_SMI_METRICS_BUF bytes and rocm_smi_api_metrics tells the layouts apart by how far
 * the library wrote. A field the firmware does not fill is all ones (0xFFFF, 0xFFFFFFFF, ...). */
typedef struct rsmi_gpu_metrics rsmi_gpu_metrics_t;
#define ROCM_SMI_METRICS_BUF 4096
struct metrics_table_header_t {
  uint16_t structure_size;
  uint8_t format_revision;
  uint8_t content_revision;
};
/* The v1.0/v1.1 part every library writes first. */
#define ROCM_SMI_METRICS_V11                                                                                           \
  struct metrics_table_header_t common_header;                                                                         \
  uint16_t temperature_edge, temperature_hotspot, temperature_mem, temperature_vrgfx, temperature_vrsoc,               \
      temperature_vrmem;                                                                                               \
  uint16_t average_gfx_activity, average_umc_activity, average_mm_activity; /* % */                                    \
  uint16_t average_socket_power;                                                                                       \
  uint64_t energy_accumulator;                                                                                         \
  uint64_t system_clock_counter;                                                                                       \
  uint16_t average_gfxclk_frequency, average_socclk_frequency, average_uclk_frequency, average_vclk0_frequency,        \
      average_dclk0_frequency, average_vclk1_frequency, average_dclk1_frequency;                                       \
  uint16_t current_gfxclk, current_socclk, current_uclk, current_vclk0, current_dclk0, current_vclk1, current_dclk1;   \
  uint32_t throttle_status; /* the ASIC's own bits */                                                                  \
  uint16_t current_fan_speed;                                                                                          \
  uint16_t pcie_link_width, pcie_link_speed;                                                                           \
  uint32_t gfx_activity_acc, mem_activity_acc;                                                                         \
  uint16_t temperature_hbm[4]
struct rsmi_metrics_v5 {
  ROCM_SMI_METRICS_V11;
};
struct rsmi_metrics_v6 {
  ROCM_SMI_METRICS_V11;
  /* v1.2, v1.3 (ROCm 6.0) */
  uint64_t firmware_timestamp;
  uint16_t voltage_soc, voltage_gfx, voltage_mem;
  uint64_t indep_throttle_status; /* ASIC-independent bits (the kernel's SMU_THROTTLER_*), v1.3 only */
  /* v1.4 */
  uint16_t current_socket_power;
  uint16_t vcn_activity[4];
  uint32_t gfxclk_lock_status;
  uint16_t xgmi_link_width, xgmi_link_speed;
  uint64_t pcie_bandwidth_acc;
  uint64_t pcie_bandwidth_inst; /* GB/s */
  uint64_t pcie_l0_to_recov_count_acc, pcie_replay_count_acc, pcie_replay_rover_count_acc;
  uint64_t xgmi_read_data_acc[8], xgmi_write_data_acc[8];
  uint16_t current_gfxclks[8], current_socclks[4], current_vclk0s[4], current_dclk0s[4];
  /* v1.5 (ROCm 6.1) */
  uint16_t jpeg_activity[32];
  uint32_t pcie_nak_sent_count_acc, pcie_nak_rcvd_count_acc;
  /* v1.6 (ROCm 6.3): throttling residencies, in accumulation_counter's units */
  uint64_t accumulation_counter;
  uint64_t prochot_residency_acc, ppt_residency_acc, socket_thm_residency_acc, vr_thm_residency_acc,
      hbm_thm_residency_acc;
};

/* What rocm_smi_api_metrics found in a metrics buffer; NAN or 0 where the table has no such field or
 * the firmware does not fill it. */
struct rocm_smi_metrics {
  int layout;              /* 5: ROCm 5.x's 96 bytes; 6: with v1.2-v1.5; 7: with v1.6 */
  unsigned content;        /* the firmware table's content revision (format 1) */
  double gfx_pct, umc_pct; /* average_gfx_activity, average_umc_activity */
  double pcie_gbs;         /* pcie_bandwidth_inst (v1.4 and later), GB/s */
  int has_indep;           /* indep_throttle_status read (v1.3) */
  uint64_t indep;
  int has_resid; /* the v1.6 residencies read */
  uint64_t acc, ppt, socket_thm, hbm_thm, vr_thm, prochot;
};
/* Fills the buffer before the call so the layout can be told afterwards (a pattern no field has). */
void rocm_smi_api_metrics_prepare(unsigned char *buf);
/* Decodes buf (ROCM_SMI_METRICS_BUF bytes, prepared, then written by rsmi_dev_gpu_metrics_info_get)
 * into m, reading only the fields its content revision has and the library's layout holds. Returns
 * 0, or -1 when the table is no format-1 (discrete GPU) table. */
int rocm_smi_api_metrics(const unsigned char *buf, struct rocm_smi_metrics *m);
/* An NVML clock-event reason mask (core's gs_clock_reasons bits) for an indep_throttle_status:
 * power limits as SwPowerCap, current limits as HwSlowdown, temperature limits as SwThermalSlowdown,
 * VRHOT and PROCHOT as HwThermalSlowdown; the others (PPM, FIT) have no counterpart. */
unsigned long long rocm_smi_api_indep_reasons(uint64_t indep);
/* The same mask from two readings of the v1.6 residencies (a earlier than b): a reason is set when
 * its limit held for at least half the time between them (ppt: SwPowerCap; socket or HBM thermal:
 * SwThermalSlowdown; VR thermal or PROCHOT: HwThermalSlowdown). -1 when b is no later than a. */
long long rocm_smi_api_resid_reasons(const struct rocm_smi_metrics *a, const struct rocm_smi_metrics *b);

/* The entry points, looked up by name (rocm_smi_api_open). NULL when the library lacks one; the
 * first five are required. */
struct rocm_smi_api {
  void *lib;
  char path[256]; /* what was loaded */
  rsmi_status_t (*rsmi_init)(uint64_t init_flags);
  rsmi_status_t (*rsmi_shut_down)(void);
  rsmi_status_t (*rsmi_num_monitor_devices)(uint32_t *num_devices);
  rsmi_status_t (*rsmi_dev_name_get)(uint32_t dv_ind, char *name, size_t len);
  rsmi_status_t (*rsmi_dev_memory_total_get)(uint32_t dv_ind, rsmi_memory_type_t mem_type, uint64_t *total);
  rsmi_status_t (*rsmi_status_string)(rsmi_status_t status, const char **status_string);
  rsmi_status_t (*rsmi_dev_unique_id_get)(uint32_t dv_ind, uint64_t *id);
  rsmi_status_t (*rsmi_dev_pci_id_get)(uint32_t dv_ind, uint64_t *bdfid);
  rsmi_status_t (*rsmi_dev_serial_number_get)(uint32_t dv_ind, char *serial_num, uint32_t len);
  rsmi_status_t (*rsmi_dev_busy_percent_get)(uint32_t dv_ind, uint32_t *busy_percent);
  rsmi_status_t (*rsmi_dev_memory_busy_percent_get)(uint32_t dv_ind, uint32_t *busy_percent);
  rsmi_status_t (*rsmi_dev_memory_usage_get)(uint32_t dv_ind, rsmi_memory_type_t mem_type, uint64_t *used);
  rsmi_status_t (*rsmi_dev_power_ave_get)(uint32_t dv_ind, uint32_t sensor_ind, uint64_t *power);
  rsmi_status_t (*rsmi_dev_current_socket_power_get)(uint32_t dv_ind, uint64_t *socket_power);
  rsmi_status_t (*rsmi_dev_power_cap_get)(uint32_t dv_ind, uint32_t sensor_ind, uint64_t *cap);
  rsmi_status_t (*rsmi_dev_energy_count_get)(uint32_t dv_ind, uint64_t *power, float *counter_resolution,
                                             uint64_t *timestamp);
  rsmi_status_t (*rsmi_dev_temp_metric_get)(uint32_t dv_ind, uint32_t sensor_type, rsmi_temperature_metric_t metric,
                                            int64_t *temperature);
  rsmi_status_t (*rsmi_dev_gpu_clk_freq_get)(uint32_t dv_ind, rsmi_clk_type_t clk_type, rsmi_frequencies_t *f);
  rsmi_status_t (*rsmi_dev_pci_throughput_get)(uint32_t dv_ind, uint64_t *sent, uint64_t *received,
                                               uint64_t *max_pkt_sz);
  rsmi_status_t (*rsmi_dev_ecc_count_get)(uint32_t dv_ind, rsmi_gpu_block_t block, rsmi_error_count_t *ec);
  rsmi_status_t (*rsmi_compute_process_info_get)(rsmi_process_info_t *procs, uint32_t *num_items);
  rsmi_status_t (*rsmi_compute_process_info_by_pid_get)(uint32_t pid, rsmi_process_info_t *proc);
  rsmi_status_t (*rsmi_compute_process_gpus_get)(uint32_t pid, uint32_t *dv_indices, uint32_t *num_devices);
  rsmi_status_t (*rsmi_dev_gpu_metrics_info_get)(uint32_t dv_ind, rsmi_gpu_metrics_t *pgpu_metrics);
};

/* Loads ROCm SMI: lib, else $GPUSCOPE_ROCM_SMI_LIB, else (only where /dev/kfd, the amdgpu driver's
 * compute node, exists) librocm_smi64.so.7, .so.6, .so.5 and librocm_smi64.so from the loader's
 * search path (ROCm 6.x ships .so.7/.so.6, 5.x .so.5), resolves
 * every entry point by name and calls rsmi_init(0). Returns 0, or -1 with a one-line reason in err
 * (the library is absent or lacks a required call: AMD GPUs are simply not sampled). */
int rocm_smi_api_open(struct rocm_smi_api *a, const char *lib, char *err, size_t errlen);
/* rsmi_shut_down and dlclose. a may be closed twice; a zeroed a is a no-op. */
void rocm_smi_api_close(struct rocm_smi_api *a);
/* The library's text for r ("RSMI_STATUS_NOT_SUPPORTED: ..."), or "error N". Never NULL. */
const char *rocm_smi_api_strerror(const struct rocm_smi_api *a, rsmi_status_t r);
/* The current frequency in MHz from what rsmi_dev_gpu_clk_freq_get wrote into buf (either layout,
 * told apart by which one reads as a valid list); -1 when neither does. max_mhz, when not NULL, gets
 * the highest level of the list (the clock's maximum), -1 likewise. */
double rocm_smi_api_clock_mhz(const unsigned char *buf, double *max_mhz);
/* The matrix-core (MFMA) generation of a marketing name: 1 for gfx908 (MI100), 2 for gfx90a
 * (MI210/MI250/MI250X), 3 for gfx942 (MI300A/MI300X/MI325X); 0 when the name is no CDNA part.
 * gfx, when not NULL, gets the target name ("gfx942"), "" when unknown. */
int rocm_smi_api_cdna(const char *name, char *gfx, size_t n);

#endif
