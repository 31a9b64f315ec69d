// LIRSDataset: full-range shuffled reading of TFRecord files through offset
// tables, backed by the Rust core crate (via crates/tfrecord-lirs-ffi).
//
// Layout follows TensorFlow's source datasets: an OpKernel that validates its
// inputs and builds a Dataset, whose Iterator keeps its state under a mutex.
//
// Seeds. The (seed, seed2) inputs and the seed generator resource follow the
// ShuffleDatasetV3 protocol, so `reshuffle_each_iteration` and
// `tf.random.set_seed` behave as with Dataset.shuffle:
//   * reshuffle_each_iteration=True  -> RandomSeedGenerator: every new iterator
//     (every epoch of `for x in ds`, every pass of ds.repeat()) draws a fresh
//     (s1, s2) pair from a Philox stream keyed by (seed, seed2);
//   * reshuffle_each_iteration=False -> FixedSeedGenerator: every iterator gets
//     the same pair;
//   * seed == seed2 == 0 -> random seeds (TF convention).
// The pair an iterator draws is folded into the core's single u64 order seed
// with ffi::mix_seeds (SplitMix64 of both halves); the core's `epoch` input is
// kept at 0 because the generator already yields a new pair per iteration.
//
// Checkpoints hold O(1) state: the drawn (s1, s2), the position in the epoch
// order and the generator's sample count (so later epochs continue exactly).
// The order itself is recomputed from the seed on restore, never stored.
//
// Errors: the Rust fetch cursor decides them (a failed read is retried per
// instance there, so each error names its own instance; a window fails as a
// whole only on an internal error). The kernel's one policy, as TensorFlow's
// TFRecordDataset: every error passes one position of the order, so a caller
// that skips errors (ignore_errors) goes on, and checkpoints agree.
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lirs_status.h"
#include "tensorflow/core/data/dataset_utils.h"
#include "tensorflow/core/data/name_utils.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/kernels/data/random_seed_ops.h"
#include "tensorflow/core/platform/mutex.h"
#include "tensorflow/core/platform/refcount.h"
#include "tensorflow/core/platform/tstring.h"

namespace tensorflow {
namespace data {
namespace {

using ::tfrecord_lirs::CallRust;
using ::tfrecord_lirs::ffi::FetchCursor;
using ::tfrecord_lirs::ffi::LirsReader;
using ::tfrecord_lirs::ffi::WindowPayloads;
namespace attr = ::tfrecord_lirs::attr;
namespace ffi = ::tfrecord_lirs::ffi;

constexpr char kLirsResourceContainer[] = "tfrecord_lirs";

// A window's payloads (Rust owns the buffers they were read into), shared by
// reference count between the iterator and every tstring that views them: the
// buffers go back to the fetch for reuse when the last of those is gone.
using WindowOwner = tstring::owner<rust::Box<WindowPayloads>>;

}  // namespace

class LIRSDatasetOp : public DatasetOpKernel {
 public:
  static constexpr const char* const kDatasetType = "LIRS";
  static constexpr const char* const kPageAware = "page_aware";
  static constexpr const char* const kSeed = "seed";
  static constexpr const char* const kSeed2 = "seed2";
  static constexpr const char* const kSeedGenerator = "seed_generator";
  static constexpr const char* const kNumShards = "num_shards";
  static constexpr const char* const kShardIndex = "shard_index";
  static constexpr const char* const kReshuffleEachIteration =
      "reshuffle_each_iteration";
  static constexpr const char* const kBatchSize = "batch_size";
  static constexpr const char* const kDropRemainder = "drop_remainder";
  static constexpr const char* const kNumParallelReads = "num_parallel_reads";
  static constexpr const char* const kDeterministic = "deterministic";

  explicit LIRSDatasetOp(OpKernelConstruction* ctx) : DatasetOpKernel(ctx) {
    OP_REQUIRES_OK(ctx,
                   ctx->GetAttr(kReshuffleEachIteration, &reshuffle_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(attr::kPageSize, &page_size_));
    OP_REQUIRES(ctx, page_size_ > 0,
                errors::InvalidArgument("`page_size` must be positive, got ",
                                        page_size_));
    // batch_size and num_parallel_reads are checked in Rust (MakeDataset).
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kBatchSize, &batch_size_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kDropRemainder, &drop_remainder_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kNumParallelReads, &num_parallel_reads_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(attr::kBackend, &backend_));
    OP_REQUIRES_OK(ctx, CallRust("", [&](ffi::Status& st) {
                     ffi::check_backend(backend_, st);
                   }));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(attr::kTrustTable, &trust_table_));
    std::string deterministic;
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kDeterministic, &deterministic));
    OP_REQUIRES_OK(ctx, DeterminismPolicy::FromString(deterministic,
                                                      &deterministic_));
  }

 protected:
  void MakeDataset(OpKernelContext* ctx, DatasetBase** output) override;

 private:
  class Dataset;
  bool reshuffle_ = true;
  int64_t page_size_ = 4096;
  int64_t batch_size_ = 0;
  bool drop_remainder_ = false;
  int64_t num_parallel_reads_ = -1;
  std::string backend_ = "auto";
  bool trust_table_ = false;
  DeterminismPolicy deterministic_;
};

class LIRSDatasetOp::Dataset : public DatasetBase {
 public:
  Dataset(OpKernelContext* ctx, std::vector<std::string> filenames,
          std::vector<std::string> offset_tables, bool page_aware,
          RandomSeeds&& seeds, bool reshuffle, int64_t page_size,
          int64_t batch_size, bool drop_remainder, int64_t num_parallel_reads,
          std::string backend, bool trust_table,
          DeterminismPolicy deterministic, int64_t num_shards,
          int64_t shard_index, std::unique_ptr<rust::Box<LirsReader>> reader,
          int64_t cardinality, SeedGeneratorManager* manager,
          ResourceHandle&& resource_handle, bool owns_resource)
      : DatasetBase(DatasetContext(ctx)),
        filenames_(std::move(filenames)),
        offset_tables_(std::move(offset_tables)),
        page_aware_(page_aware),
        seeds_(std::move(seeds)),
        reshuffle_(reshuffle),
        page_size_(page_size),
        batch_size_(batch_size),
        drop_remainder_(drop_remainder),
        num_parallel_reads_(num_parallel_reads),
        backend_(std::move(backend)),
        trust_table_(trust_table),
        deterministic_(deterministic),
        output_shapes_({batch_size == 0 ? PartialTensorShape({})
                        : drop_remainder ? PartialTensorShape({batch_size})
                                         : PartialTensorShape({-1})}),
        num_shards_(num_shards),
        shard_index_(shard_index),
        reader_(std::move(reader)),
        cardinality_(cardinality),
        manager_(manager),
        resource_handle_(std::move(resource_handle)),
        resource_mgr_(ctx->resource_manager()),
        owns_resource_(owns_resource) {}

  ~Dataset() override {
    manager_->Unref();
    if (owns_resource_) {
      absl::Status s = resource_mgr_->Delete<SeedGeneratorManager>(
          resource_handle_.container(), resource_handle_.name());
      if (!s.ok()) {
        LOG(WARNING) << "LIRSDataset: failed to delete seed generator: " << s;
      }
    }
  }

  std::unique_ptr<IteratorBase> MakeIteratorInternal(
      const std::string& prefix) const override {
    return std::make_unique<Iterator>(Iterator::Params{
        this, name_utils::IteratorPrefix(kDatasetType, prefix)});
  }

  const DataTypeVector& output_dtypes() const override {
    static DataTypeVector* dtypes = new DataTypeVector({DT_STRING});
    return *dtypes;
  }

  const std::vector<PartialTensorShape>& output_shapes() const override {
    return output_shapes_;
  }

  std::string DebugString() const override {
    return name_utils::DatasetDebugString(kDatasetType);
  }

  // Instances in this shard, or batches of them.
  int64_t CardinalityInternal(CardinalityOptions options) const override {
    if (batch_size_ == 0) return cardinality_;
    return drop_remainder_ ? cardinality_ / batch_size_
                           : (cardinality_ + batch_size_ - 1) / batch_size_;
  }

  absl::Status InputDatasets(
      std::vector<const DatasetBase*>* inputs) const override {
    return absl::OkStatus();
  }

  absl::Status CheckExternalState() const override { return absl::OkStatus(); }

  const LirsReader& reader() const { return **reader_; }

 protected:
  absl::Status AsGraphDefInternal(SerializationContext* ctx,
                                  DatasetGraphDefBuilder* b,
                                  Node** output) const override {
    Node* filenames = nullptr;
    TF_RETURN_IF_ERROR(b->AddVector(filenames_, &filenames));
    Node* offset_tables = nullptr;
    TF_RETURN_IF_ERROR(b->AddVector(offset_tables_, &offset_tables));
    Node* page_aware = nullptr;
    TF_RETURN_IF_ERROR(b->AddScalar(page_aware_, &page_aware));
    Node* seed = nullptr;
    TF_RETURN_IF_ERROR(b->AddScalar(seeds_.input_seed(), &seed));
    Node* seed2 = nullptr;
    TF_RETURN_IF_ERROR(b->AddScalar(seeds_.input_seed2(), &seed2));
    // The handle of the generator this dataset uses, so a dataset rebuilt from
    // this graph (tf.data rewrites) shares it and keeps reshuffling.
    Node* seed_generator = nullptr;
    Tensor handle(DT_RESOURCE, TensorShape({}));
    handle.scalar<ResourceHandle>()() = resource_handle_;
    TF_RETURN_IF_ERROR(b->AddTensor(handle, &seed_generator));
    Node* num_shards = nullptr;
    TF_RETURN_IF_ERROR(b->AddScalar(num_shards_, &num_shards));
    Node* shard_index = nullptr;
    TF_RETURN_IF_ERROR(b->AddScalar(shard_index_, &shard_index));
    // Each attr as the AttrValue the graph stores.
    auto attr_value = [b](const auto& value) {
      AttrValue out;
      b->BuildAttrValue(value, &out);
      return out;
    };
    return b->AddDataset(
        this,
        {filenames, offset_tables, page_aware, seed, seed2, seed_generator,
         num_shards, shard_index},
        {{kReshuffleEachIteration, attr_value(reshuffle_)},
         {attr::kPageSize, attr_value(page_size_)},
         {kBatchSize, attr_value(batch_size_)},
         {kDropRemainder, attr_value(drop_remainder_)},
         {kNumParallelReads, attr_value(num_parallel_reads_)},
         {attr::kBackend, attr_value(backend_)},
         {attr::kTrustTable, attr_value(trust_table_)},
         {kDeterministic, attr_value(deterministic_.String())}},
        output);
  }

 private:
  class Iterator : public DatasetIterator<Dataset> {
   public:
    static constexpr const char* const kSeedKey = "seed";
    static constexpr const char* const kSeed2Key = "seed2";
    static constexpr const char* const kPositionKey = "position";
    // Unordered delivery: positions past `position` already delivered.
    static constexpr const char* const kDeliveredAfterKey = "delivered_after";
    static constexpr const char* const kNumRandomSamples = "num_random_samples";

    explicit Iterator(const Params& params)
        : DatasetIterator<Dataset>(params),
          seed_generator_(dataset()->manager_->get()) {}

    bool SymbolicCheckpointCompatible() const override { return true; }

    absl::Status Initialize(IteratorContext* ctx) override {
      mutex_lock l(mu_);
      // Unordered (RINAS) when the op says so, or by default when the
      // pipeline's tf.data.Options().deterministic is False.
      const DeterminismPolicy& policy = dataset()->deterministic_;
      const Options* options = ctx->options();
      unordered_ = policy.IsNondeterministic() ||
                   (policy.IsDefault() && options != nullptr &&
                    options->optional_deterministic_case() ==
                        Options::kDeterministic &&
                    !options->deterministic());
      seed_generator_->GenerateSeeds(&seed_, &seed2_);
      partial_.clear();
      return ResetCursorLocked(0);
    }

    absl::Status GetNextInternal(IteratorContext* ctx,
                                 std::vector<Tensor>* out_tensors,
                                 bool* end_of_sequence) override {
      mutex_lock l(mu_);
      const Dataset* d = dataset();
      if (d->batch_size_ == 0) {
        Tensor record(ctx->allocator({}), DT_STRING, {});
        bool got = false;
        TF_RETURN_IF_ERROR(NextPayloadLocked(&record.scalar<tstring>()(), &got,
                                             /*share=*/false));
        *end_of_sequence = !got;
        if (got) out_tensors->push_back(std::move(record));
        return absl::OkStatus();
      }
      // A batch formed in the kernel (the paper's random assignment table ->
      // batches): no per-element tf.data overhead. Payloads are not copied:
      // each string of the batch views its payload where the fetch read it
      // (see NextPayloadLocked). If an error interrupts the batch, the
      // payloads already read move to `partial_` and the next call (e.g. from
      // ignore_errors) completes the batch from there, so an error costs only
      // its own instance.
      const int64_t batch_size = d->batch_size_;
      Tensor records(ctx->allocator({}), DT_STRING, {batch_size});
      auto flat = records.flat<tstring>();
      int64_t n = 0;
      if (partial_.empty()) partial_start_ = emitted_;
      for (tstring& p : partial_) flat(n++) = std::move(p);
      partial_.clear();
      for (;;) {
        while (n < batch_size) {
          // Unordered: a batch is one window (windows of exactly batch_size
          // ids, the last one shorter), whichever completed; never two.
          if (unordered_ && n > 0 && block_pos_ >= block_ids_.size()) break;
          bool got = false;
          absl::Status s = NextPayloadLocked(&flat(n), &got, /*share=*/true);
          if (!s.ok()) {
            for (int64_t i = 0; i < n; ++i) partial_.push_back(std::move(flat(i)));
            return s;
          }
          if (!got) break;
          ++n;
        }
        if (unordered_ && n > 0 && d->drop_remainder_ && n < batch_size) {
          // The short last window of the order may come before others:
          // dropped, and the epoch goes on with the next window.
          n = 0;
          continue;
        }
        break;
      }
      if (n == 0 || (d->drop_remainder_ && n < batch_size)) {
        *end_of_sequence = true;
        return absl::OkStatus();
      }
      if (n < batch_size) {  // the last, smaller batch
        Tensor last(ctx->allocator({}), DT_STRING, {n});
        auto last_flat = last.flat<tstring>();
        for (int64_t i = 0; i < n; ++i) last_flat(i) = std::move(flat(i));
        records = std::move(last);
      }
      out_tensors->push_back(std::move(records));
      *end_of_sequence = false;
      return absl::OkStatus();
    }

   protected:
    std::shared_ptr<model::Node> CreateNode(
        IteratorContext* ctx, model::Node::Args args) const override {
      return model::MakeSourceNode(std::move(args));
    }

    absl::Status SaveInternal(SerializationContext* ctx,
                              IteratorStateWriter* writer) override {
      mutex_lock l(mu_);
      TF_RETURN_IF_ERROR(writer->WriteScalar(prefix(), kSeedKey, seed_));
      TF_RETURN_IF_ERROR(writer->WriteScalar(prefix(), kSeed2Key, seed2_));
      // Instances handed out so far; read-ahead is not part of the state. The
      // payloads of a batch left incomplete by an error are not stored either
      // (the state stays O(1)): the restored iterator re-reads them from the
      // first one on.
      uint64_t position = partial_.empty() ? emitted_ : partial_start_;
      if (unordered_ && fetch_ != nullptr) {
        // What was delivered is no longer a prefix of the order: the first
        // position not delivered, and those past it that were (their windows
        // completed first). The unserved rest of the current window, and a
        // batch left incomplete by an error, count as not delivered.
        const size_t unserved =
            block_ids_.size() - std::min(block_pos_, block_ids_.size()) +
            partial_.size();
        rust::Vec<uint64_t> after;
        TF_RETURN_IF_ERROR(
            CallRust("LIRSDataset checkpoint: ", [&](ffi::Status& st) {
              position = (*fetch_)->resume(unserved, after, st);
            }));
        Tensor t(DT_INT64, TensorShape({static_cast<int64_t>(after.size())}));
        auto flat = t.flat<int64_t>();
        for (size_t i = 0; i < after.size(); ++i) {
          flat(i) = static_cast<int64_t>(after[i]);
        }
        TF_RETURN_IF_ERROR(writer->WriteTensor(prefix(), kDeliveredAfterKey, t));
      }
      TF_RETURN_IF_ERROR(writer->WriteScalar(prefix(), kPositionKey,
                                             static_cast<int64_t>(position)));
      TF_RETURN_IF_ERROR(writer->WriteScalar(
          prefix(), kNumRandomSamples, seed_generator_->num_random_samples()));
      return absl::OkStatus();
    }

    absl::Status RestoreInternal(IteratorContext* ctx,
                                 IteratorStateReader* reader) override {
      mutex_lock l(mu_);
      int64_t num_random_samples = 0;
      TF_RETURN_IF_ERROR(
          reader->ReadScalar(prefix(), kNumRandomSamples, &num_random_samples));
      seed_generator_->set_num_random_samples(num_random_samples);
      seed_generator_->Reset();
      TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), kSeedKey, &seed_));
      TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), kSeed2Key, &seed2_));
      int64_t position = 0;
      TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), kPositionKey, &position));
      if (position < 0) {
        return errors::DataLoss("LIRSDataset checkpoint: negative position ",
                                position);
      }
      partial_.clear();
      std::vector<uint64_t> after;
      if (reader->Contains(prefix(), kDeliveredAfterKey)) {
        Tensor t;
        TF_RETURN_IF_ERROR(reader->ReadTensor(prefix(), kDeliveredAfterKey, &t));
        auto flat = t.flat<int64_t>();
        for (int64_t i = 0; i < flat.size(); ++i) {
          if (flat(i) < position) {
            return errors::DataLoss(
                "LIRSDataset checkpoint: delivered position ", flat(i),
                " before the restore position ", position);
          }
          after.push_back(static_cast<uint64_t>(flat(i)));
        }
      }
      return ResetCursorLocked(static_cast<uint64_t>(position), after);
    }

   private:
    // The next payload of the order into `*out` (`*got` false at the end).
    // `share`: `*out` views the payload in the window's buffer and holds a
    // reference to the window (no allocation, no copy per record); used for
    // batches, whose strings come from the same few windows and live and die
    // together. A single element would keep its whole window alive (e.g. in a
    // downstream shuffle buffer), so elements get a copy; so do payloads that
    // fit in a tstring's inline buffer.
    absl::Status NextPayloadLocked(tstring* out, bool* got, bool share)
        TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      *got = false;
      if (block_pos_ >= block_ids_.size()) {
        TF_RETURN_IF_ERROR(RefillLocked());
        if (block_ids_.empty()) return absl::OkStatus();
      }
      const size_t i = block_pos_++;
      ++emitted_;  // before reading: an error passes this position
      const WindowPayloads& window = *window_->value();
      rust::Slice<const uint8_t> payload;
      if (window_all_read_) {
        payload = window.payload_at(i);  // the hot path: no status, no throw
      } else {
        try {
          payload = window.payload(i, status_);
        } catch (const rust::Error&) {
          return ::tfrecord_lirs::TakeError(
              status_, absl::StrCat("LIRSDataset: reading instance ",
                                    block_ids_[i], ": "));
        }
      }
      const char* data = reinterpret_cast<const char*>(payload.data());
      if (share && payload.size() > TF_TString_SmallCapacity) {
        out->assign_as_shared_view(data, payload.size(), window_.get());
      } else {
        out->assign(data, payload.size());
      }
      *got = true;
      return absl::OkStatus();
    }

    // Takes the next window of the order from the fetch cursor (which reads
    // windows ahead in parallel; runs of consecutive ids, i.e. page-aware
    // units, cost one read each).
    absl::Status RefillLocked() TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      block_pos_ = 0;
      block_ids_.clear();
      if (fetch_ == nullptr) {
        const uint64_t end = static_cast<uint64_t>(dataset()->cardinality_);
        if (emitted_ >= end) return absl::OkStatus();  // nothing left to read
        absl::Status s =
            rebuild_ ? (unordered_ ? ResetCursorLocked(rebuild_position_,
                                                       rebuild_after_)
                                   : ResetCursorLocked(emitted_))
                     : errors::FailedPrecondition(
                           "LIRSDataset: the iterator has no fetch cursor "
                           "(building it failed at initialization or restore); "
                           "skipping position ",
                           emitted_);
        if (!s.ok()) {
          ++emitted_;  // the error policy
          return s;
        }
      }
      window_.reset();
      absl::Status s = CallRust("LIRSDataset: ", [&](ffi::Status& st) {
        (*fetch_)->next_window(block_ids_, st);
      });
      if (s.ok()) {
        window_.reset(new WindowOwner((*fetch_)->take_window()));
        window_all_read_ = window_->value()->all_read();
      } else {
        // The window failed as a whole (internal: a panic, dead fetch
        // threads); the cursor may be half-updated, so the next call builds a
        // fresh one after the position this error passes (unordered: from
        // where it was, the failed window counted as passed).
        if (unordered_) {
          rebuild_position_ = emitted_;
          rebuild_after_.clear();
          rust::Vec<uint64_t> after;
          ffi::Status st{ffi::ErrorCode::Ok, rust::String()};
          try {
            rebuild_position_ = (*fetch_)->resume(0, after, st);
            rebuild_after_.assign(after.begin(), after.end());
          } catch (const std::exception&) {
          }
        }
        fetch_.reset();
        rebuild_ = true;
        block_ids_.clear();
        ++emitted_;  // the error policy
      }
      return s;
    }

    // Recomputes this iteration's order from (seed_, seed2_), positioned at
    // `position`, with a fresh fetch pool; `after`: positions past it already
    // delivered (an unordered iterator's checkpoint), left out.
    absl::Status ResetCursorLocked(uint64_t position,
                                   const std::vector<uint64_t>& after = {})
        TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      const Dataset* d = dataset();
      fetch_.reset();  // joins the previous pool's threads first
      TF_RETURN_IF_ERROR(CallRust("LIRSDataset: ", [&](ffi::Status& st) {
        // Threads, window and depth: Rust's defaults for this op's attrs.
        ffi::FetchSpec spec =
            d->reader().fetch_spec(d->batch_size_, d->num_parallel_reads_, st);
        spec.seed = ffi::mix_seeds(seed_, seed2_);
        spec.epoch = 0;  // the seed generator gives every iteration its seeds
        spec.page_aware = d->page_aware_;
        spec.num_shards = static_cast<uint64_t>(d->num_shards_);
        spec.shard_index = static_cast<uint64_t>(d->shard_index_);
        spec.position = position;
        spec.unordered = unordered_;
        spec.skip.clear();
        for (uint64_t p : after) spec.skip.push_back(p);
        fetch_ = std::make_unique<rust::Box<FetchCursor>>(
            d->reader().fetch(spec, st));
      }));
      emitted_ = position + after.size();  // instances delivered
      rebuild_ = false;
      window_.reset();
      block_ids_.clear();
      block_pos_ = 0;
      return absl::OkStatus();
    }

    mutex mu_;
    // Windows are handed out as they complete (see Initialize).
    bool unordered_ TF_GUARDED_BY(mu_) = false;
    // Unordered: where a cursor dropped after an internal error resumes.
    uint64_t rebuild_position_ TF_GUARDED_BY(mu_) = 0;
    std::vector<uint64_t> rebuild_after_ TF_GUARDED_BY(mu_);
    std::shared_ptr<SeedGenerator> seed_generator_;
    int64_t seed_ TF_GUARDED_BY(mu_) = 0;
    int64_t seed2_ TF_GUARDED_BY(mu_) = 0;
    // Null after a failed (re)build, or after an internal error until the
    // next call rebuilds it (`rebuild_`).
    std::unique_ptr<rust::Box<FetchCursor>> fetch_ TF_GUARDED_BY(mu_);
    bool rebuild_ TF_GUARDED_BY(mu_) = false;
    uint64_t emitted_ TF_GUARDED_BY(mu_) = 0;  // Position in the epoch order.
    // The current window's ids and payloads (null before the first window).
    rust::Vec<uint64_t> block_ids_ TF_GUARDED_BY(mu_);
    core::RefCountPtr<WindowOwner> window_ TF_GUARDED_BY(mu_);
    bool window_all_read_ TF_GUARDED_BY(mu_) = false;
    size_t block_pos_ TF_GUARDED_BY(mu_) = 0;
    // Reused by the per-payload calls (no allocation while they succeed).
    ffi::Status status_ TF_GUARDED_BY(mu_){ffi::ErrorCode::Ok, rust::String()};
    // Batched output: the batch being filled (kept across errors), and the
    // position of its first payload.
    std::vector<tstring> partial_ TF_GUARDED_BY(mu_);
    uint64_t partial_start_ TF_GUARDED_BY(mu_) = 0;
  };

  const std::vector<std::string> filenames_;
  const std::vector<std::string> offset_tables_;
  const bool page_aware_;
  const RandomSeeds seeds_;
  const bool reshuffle_;
  const int64_t page_size_;
  const int64_t batch_size_;
  const bool drop_remainder_;
  const int64_t num_parallel_reads_;
  const std::string backend_;
  const bool trust_table_;
  const DeterminismPolicy deterministic_;
  const std::vector<PartialTensorShape> output_shapes_;
  const int64_t num_shards_;
  const int64_t shard_index_;
  const std::unique_ptr<rust::Box<LirsReader>> reader_;
  const int64_t cardinality_;
  SeedGeneratorManager* const manager_;  // Owns one reference.
  const ResourceHandle resource_handle_;
  ResourceMgr* const resource_mgr_;  // Not owned.
  const bool owns_resource_;
};

void LIRSDatasetOp::MakeDataset(OpKernelContext* ctx, DatasetBase** output) {
  const Tensor* filenames_t;
  OP_REQUIRES_OK(ctx, ctx->input(attr::kFileNames, &filenames_t));
  std::vector<std::string> filenames;
  OP_REQUIRES_OK(ctx, ::tfrecord_lirs::StringList(*filenames_t, attr::kFileNames,
                                                  &filenames));
  const Tensor* offset_tables_t;
  OP_REQUIRES_OK(ctx, ctx->input(attr::kOffsetTables, &offset_tables_t));
  std::vector<std::string> offset_tables;
  OP_REQUIRES_OK(ctx, ::tfrecord_lirs::StringList(
                          *offset_tables_t, attr::kOffsetTables, &offset_tables));

  bool page_aware = false;
  OP_REQUIRES_OK(ctx, ParseScalarArgument<bool>(ctx, kPageAware, &page_aware));
  int64_t seed = 0, seed2 = 0;
  OP_REQUIRES_OK(ctx, ParseScalarArgument<int64_t>(ctx, kSeed, &seed));
  OP_REQUIRES_OK(ctx, ParseScalarArgument<int64_t>(ctx, kSeed2, &seed2));
  int64_t num_shards = 1, shard_index = 0;
  OP_REQUIRES_OK(ctx,
                 ParseScalarArgument<int64_t>(ctx, kNumShards, &num_shards));
  OP_REQUIRES_OK(ctx,
                 ParseScalarArgument<int64_t>(ctx, kShardIndex, &shard_index));
  // Checked before any file is opened.
  OP_REQUIRES_OK(ctx, CallRust("", [&](ffi::Status& st) {
                   ffi::check_shard(num_shards, shard_index, st);
                 }));

  std::unique_ptr<rust::Box<LirsReader>> reader;
  uint64_t shard_len = 0;
  OP_REQUIRES_OK(ctx, CallRust("", [&](ffi::Status& st) {
                   reader = std::make_unique<rust::Box<LirsReader>>(
                       ffi::open_reader(::tfrecord_lirs::MakeReaderSpec(
                                            filenames, offset_tables,
                                            page_size_, backend_, trust_table_),
                                        st));
                   shard_len = (*reader)->shard_len(num_shards, shard_index, st);
                   // Checks batch_size and num_parallel_reads now, not at the
                   // first iteration.
                   (*reader)->fetch_spec(batch_size_, num_parallel_reads_, st);
                 }));

  // Seed generator: the ShuffleDatasetV3 protocol. Python passes a dummy
  // handle; if nothing is registered under it, this dataset creates (and owns)
  // a generator under a fresh name, and serializes that name so rebuilt copies
  // of the dataset share it.
  RandomSeeds seeds(seed, seed2);
  ResourceHandle handle = HandleFromInput(ctx, 5);
  SeedGeneratorManager* manager = nullptr;
  absl::Status s = ctx->resource_manager()->Lookup<SeedGeneratorManager>(
      handle.container(), handle.name(), &manager);
  bool owns_resource = false;
  if (absl::IsNotFound(s)) {
    static std::atomic<int64_t> resource_counter(0);
    const std::string name = absl::StrCat(
        ctx->op_kernel().name(), "/seed_generator_", resource_counter++);
    const bool reshuffle = reshuffle_;
    OP_REQUIRES_OK(
        ctx, ctx->resource_manager()->LookupOrCreate<SeedGeneratorManager>(
                 kLirsResourceContainer, name, &manager,
                 [reshuffle, &seeds](SeedGeneratorManager** m) {
                   if (reshuffle) {
                     *m = new SeedGeneratorManager(
                         new RandomSeedGenerator(seeds));
                   } else {
                     *m = new SeedGeneratorManager(
                         new FixedSeedGenerator(seeds));
                   }
                   return absl::OkStatus();
                 }));
    handle = MakeResourceHandle<SeedGeneratorManager>(
        ctx, kLirsResourceContainer, name);
    owns_resource = true;
  } else {
    OP_REQUIRES_OK(ctx, s);
  }

  *output = new Dataset(ctx, std::move(filenames), std::move(offset_tables),
                        page_aware, std::move(seeds), reshuffle_, page_size_,
                        batch_size_, drop_remainder_, num_parallel_reads_,
                        backend_, trust_table_, deterministic_, num_shards,
                        shard_index,
                        std::move(reader),
                        static_cast<int64_t>(shard_len), manager,
                        std::move(handle), owns_resource);
}

namespace {
REGISTER_KERNEL_BUILDER(Name("LIRSDataset").Device(DEVICE_CPU), LIRSDatasetOp);
}  // namespace

}  // namespace data
}  // namespace tensorflow
