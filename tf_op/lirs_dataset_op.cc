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

namespace tensorflow {
namespace data {
namespace {

using ::tfrecord_lirs::ffi::LirsReader;
using ::tfrecord_lirs::ffi::FetchCursor;

constexpr char kLirsResourceContainer[] = "tfrecord_lirs";

absl::Status ReadStringList(OpKernelContext* ctx, const char* name,
                            std::vector<std::string>* out) {
  const Tensor* t;
  TF_RETURN_IF_ERROR(ctx->input(name, &t));
  if (t->dims() > 1) {
    return errors::InvalidArgument("`", name,
                                   "` must be a scalar or a vector, got shape ",
                                   t->shape().DebugString());
  }
  out->clear();
  out->reserve(t->NumElements());
  for (int64_t i = 0; i < t->NumElements(); ++i) {
    out->push_back(std::string(t->flat<tstring>()(i)));
  }
  return absl::OkStatus();
}

// Opens the shared reader over (files, tables); tables may be empty.
absl::Status OpenReader(const std::vector<std::string>& files,
                        const std::vector<std::string>& tables,
                        int64_t page_size, const std::string& backend,
                        bool trust_table,
                        std::unique_ptr<rust::Box<LirsReader>>* out) {
  LIRS_RETURN_IF_RUST_ERROR("", {
    // cxx takes CxxVector<CxxString> == std::vector<std::string>.
    *out = std::make_unique<rust::Box<LirsReader>>(tfrecord_lirs::ffi::open_reader(
        files, tables, static_cast<uint64_t>(page_size), /*verify_payload_crc=*/true,
        rust::Str(backend), trust_table));
  });
  return absl::OkStatus();
}

}  // namespace

class LIRSDatasetOp : public DatasetOpKernel {
 public:
  static constexpr const char* const kDatasetType = "LIRS";
  static constexpr const char* const kFileNames = "filenames";
  static constexpr const char* const kOffsetTables = "offset_tables";
  static constexpr const char* const kPageAware = "page_aware";
  static constexpr const char* const kSeed = "seed";
  static constexpr const char* const kSeed2 = "seed2";
  static constexpr const char* const kSeedGenerator = "seed_generator";
  static constexpr const char* const kNumShards = "num_shards";
  static constexpr const char* const kShardIndex = "shard_index";
  static constexpr const char* const kReshuffleEachIteration =
      "reshuffle_each_iteration";
  static constexpr const char* const kPageSize = "page_size";
  static constexpr const char* const kBatchSize = "batch_size";
  static constexpr const char* const kDropRemainder = "drop_remainder";
  static constexpr const char* const kNumParallelReads = "num_parallel_reads";
  static constexpr const char* const kBackend = "backend";
  static constexpr const char* const kTrustTable = "trust_table";
  static constexpr const char* const kDeterministic = "deterministic";

  explicit LIRSDatasetOp(OpKernelConstruction* ctx) : DatasetOpKernel(ctx) {
    OP_REQUIRES_OK(ctx,
                   ctx->GetAttr(kReshuffleEachIteration, &reshuffle_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kPageSize, &page_size_));
    OP_REQUIRES(ctx, page_size_ > 0,
                errors::InvalidArgument("`page_size` must be positive, got ",
                                        page_size_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kBatchSize, &batch_size_));
    OP_REQUIRES(ctx, batch_size_ >= 0,
                errors::InvalidArgument("`batch_size` must be >= 0, got ",
                                        batch_size_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kDropRemainder, &drop_remainder_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kNumParallelReads, &num_parallel_reads_));
    OP_REQUIRES(ctx, num_parallel_reads_ == -1 || num_parallel_reads_ >= 1,
                errors::InvalidArgument(
                    "`num_parallel_reads` must be >= 1 or -1 (automatic), got ",
                    num_parallel_reads_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kBackend, &backend_));
    OP_REQUIRES_OK(ctx, ::tfrecord_lirs::CheckBackend(backend_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kTrustTable, &trust_table_));
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
    AttrValue reshuffle;
    b->BuildAttrValue(reshuffle_, &reshuffle);
    AttrValue page_size;
    b->BuildAttrValue(page_size_, &page_size);
    AttrValue batch_size;
    b->BuildAttrValue(batch_size_, &batch_size);
    AttrValue drop_remainder;
    b->BuildAttrValue(drop_remainder_, &drop_remainder);
    AttrValue num_parallel_reads;
    b->BuildAttrValue(num_parallel_reads_, &num_parallel_reads);
    AttrValue backend;
    b->BuildAttrValue(backend_, &backend);
    AttrValue trust_table;
    b->BuildAttrValue(trust_table_, &trust_table);
    AttrValue deterministic;
    b->BuildAttrValue(deterministic_.String(), &deterministic);
    return b->AddDataset(
        this,
        {filenames, offset_tables, page_aware, seed, seed2, seed_generator,
         num_shards, shard_index},
        {{kReshuffleEachIteration, reshuffle},
         {kPageSize, page_size},
         {kBatchSize, batch_size},
         {kDropRemainder, drop_remainder},
         {kNumParallelReads, num_parallel_reads},
         {kBackend, backend},
         {kTrustTable, trust_table},
         {kDeterministic, deterministic}},
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
        TF_RETURN_IF_ERROR(NextPayloadLocked(&record.scalar<tstring>()(), &got));
        *end_of_sequence = !got;
        if (got) out_tensors->push_back(std::move(record));
        return absl::OkStatus();
      }
      // A batch formed in the kernel (the paper's random assignment table ->
      // batches): no per-element tf.data overhead. Payloads are copied once,
      // from the window the cursor holds straight into the output tensor. If
      // an error interrupts the batch, the payloads already read move to
      // `partial_` and the next call (e.g. from ignore_errors) completes the
      // batch from there, so an error costs only its own instance.
      const int64_t batch_size = d->batch_size_;
      Tensor records(ctx->allocator({}), DT_STRING, {batch_size});
      auto flat = records.flat<tstring>();
      int64_t n = 0;
      uint64_t start = partial_start_;  // position of the batch's first payload
      for (tstring& p : partial_) flat(n++) = std::move(p);
      partial_.clear();
      for (;;) {
        while (n < batch_size) {
          // Unordered: a batch is one window (windows of exactly batch_size ids,
          // the last one shorter), whichever completed; it never takes from two.
          if (unordered_ && n > 0 && block_pos_ >= block_ids_.size()) break;
          if (block_ok_ && block_pos_ < block_ids_.size()) {
            // The common case: the rest of a fetched window, in bulk.
            const size_t take = std::min<size_t>(
                static_cast<size_t>(batch_size - n), block_ids_.size() - block_pos_);
            if (n == 0) start = emitted_;
            const FetchCursor& cursor = **fetch_;
            for (size_t k = 0; k < take; ++k) {
              const rust::Slice<const uint8_t> p = cursor.payload(block_pos_ + k);
              flat(n++).assign(reinterpret_cast<const char*>(p.data()), p.size());
            }
            block_pos_ += take;
            emitted_ += take;
            continue;
          }
          // A new window, or one whose read failed (re-read one by one).
          bool got = false;
          absl::Status s = NextPayloadLocked(&flat(n), &got);
          if (!s.ok()) {
            for (int64_t i = 0; i < n; ++i) partial_.push_back(std::move(flat(i)));
            partial_start_ = start;
            return s;
          }
          if (!got) break;
          if (n == 0) start = emitted_ - 1;
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
        LIRS_RETURN_IF_RUST_ERROR(
            "LIRSDataset checkpoint: ",
            position = (*fetch_)->resume(unserved, after));
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
    absl::Status NextPayloadLocked(tstring* out, bool* got)
        TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      *got = false;
      if (block_pos_ >= block_ids_.size()) {
        TF_RETURN_IF_ERROR(RefillLocked());
        if (block_ids_.empty()) return absl::OkStatus();
      }
      const size_t i = block_pos_++;
      const uint64_t id = block_ids_[i];
      // Counted before reading: a caller that skips errors (ignore_errors)
      // continues with the next instance, and checkpoints agree.
      ++emitted_;
      if (block_ok_) {
        const rust::Slice<const uint8_t> payload = (*fetch_)->payload(i);
        out->assign(reinterpret_cast<const char*>(payload.data()),
                    payload.size());
      } else {
        // The window's read failed: read one by one so the error names the
        // exact instance and the others are still delivered.
        rust::Vec<uint8_t> payload;
        LIRS_RETURN_IF_RUST_ERROR(
            absl::StrCat("LIRSDataset: reading instance ", id, ": "),
            payload = dataset()->reader().read(id));
        out->assign(reinterpret_cast<const char*>(payload.data()),
                    payload.size());
      }
      *got = true;
      return absl::OkStatus();
    }

    // Takes the next window of the order from the fetch pool (which reads
    // windows ahead in parallel; runs of consecutive ids, i.e. page-aware
    // units, cost one read each).
    //
    // Every error returned here passes one position of the order (as a failed
    // instance does in NextPayloadLocked), so a caller that skips errors
    // (ignore_errors) always reaches the end instead of spinning.
    absl::Status RefillLocked() TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      block_pos_ = 0;
      block_ok_ = false;
      // Cleared here, not only in Rust: a failure before Rust clears them must
      // not leave the previous window's ids to be retried (and repeated).
      block_ids_.clear();
      const uint64_t end = static_cast<uint64_t>(dataset()->cardinality_);
      if (fetch_ == nullptr) {
        if (emitted_ >= end) return absl::OkStatus();  // nothing left to read
        if (!rebuild_) {
          ++emitted_;
          return errors::FailedPrecondition(
              "LIRSDataset: the iterator has no fetch cursor (building it "
              "failed at initialization or restore); skipping position ",
              emitted_ - 1);
        }
        // The cursor was dropped after an internal error: a fresh one from
        // the current position (unordered: from where it was, past the failed
        // window).
        absl::Status s = unordered_
                             ? ResetCursorLocked(rebuild_position_, rebuild_after_)
                             : ResetCursorLocked(emitted_);
        if (!s.ok()) {
          ++emitted_;
          return s;
        }
      }
      std::string what;
      try {
        block_ok_ = (*fetch_)->next_window(block_ids_);
        return absl::OkStatus();
      } catch (const rust::Error& e) {
        std::string message;
        if (::tfrecord_lirs::ParseRustError(e.what(), &message) !=
                ::tfrecord_lirs::kLirsInternal &&
            !block_ids_.empty()) {
          // A read error: `block_ids_` holds the failed window and
          // NextPayloadLocked re-reads its ids singly, so the error names the
          // exact instance and the good ones are still delivered.
          block_ok_ = false;
          return absl::OkStatus();
        }
        what = e.what();
      } catch (const std::exception& e) {
        what = absl::StrCat("INTERNAL: ", e.what());
      }
      // Not a read error (a panic in Rust, dead fetch threads): retrying the
      // ids singly would hide it, so it is reported as is. The cursor may be
      // half-updated (or poisoned): it is dropped, and the next call builds a
      // fresh one after the window's first position, which this error passes.
      if (unordered_) {
        // Where the consumer is; the failed window counts as delivered (passed).
        rebuild_position_ = emitted_;
        rebuild_after_.clear();
        try {
          rust::Vec<uint64_t> after;
          rebuild_position_ = (*fetch_)->resume(0, after);
          rebuild_after_.assign(after.begin(), after.end());
        } catch (const std::exception&) {
        }
      }
      fetch_.reset();
      rebuild_ = true;
      block_ids_.clear();
      ++emitted_;
      std::string message;
      const auto code = ::tfrecord_lirs::ParseRustError(what, &message);
      return absl::Status(::tfrecord_lirs::ToStatusCode(code),
                          absl::StrCat("LIRSDataset: ", message));
    }

    // Recomputes this iteration's order from (seed_, seed2_), positioned at
    // `position`, with a fresh fetch pool; `after`: positions past it already
    // delivered (an unordered iterator's checkpoint), left out.
    absl::Status ResetCursorLocked(uint64_t position,
                                   const std::vector<uint64_t>& after = {})
        TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      const Dataset* d = dataset();
      fetch_.reset();  // joins the previous pool's threads first
      LIRS_RETURN_IF_RUST_ERROR("LIRSDataset: ", {
        const uint64_t order_seed = tfrecord_lirs::ffi::mix_seeds(seed_, seed2_);
        // 0 lets the core choose (FetchOptions::auto_threads).
        const size_t threads = d->num_parallel_reads_ > 0
                                   ? static_cast<size_t>(d->num_parallel_reads_)
                                   : 0;
        // Unordered batches: windows of exactly one batch, so that each batch
        // holds the instances it holds in order.
        const bool exact = unordered_ && d->batch_size_ > 0;
        const size_t window =
            exact ? static_cast<size_t>(d->batch_size_)
                  : std::max<size_t>(kMinWindow,
                                     static_cast<size_t>(d->batch_size_));
        auto fetch = d->reader().fetch(
            order_seed, /*epoch=*/0, d->page_aware_,
            static_cast<uint64_t>(d->num_shards_),
            static_cast<uint64_t>(d->shard_index_), position, threads, window,
            kWindowsAhead, unordered_, exact,
            rust::Slice<const uint64_t>(after.data(), after.size()));
        fetch_ = std::make_unique<rust::Box<FetchCursor>>(std::move(fetch));
      });
      emitted_ = position + after.size();  // instances delivered
      rebuild_ = false;
      block_ids_.clear();
      block_pos_ = 0;
      block_ok_ = false;
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
    // Fetch pool defaults: the smallest window of ids, and windows read ahead
    // of the consumer (threads: the core decides when num_parallel_reads is
    // automatic).
    static constexpr size_t kMinWindow = 64;
    static constexpr size_t kWindowsAhead = 4;

    // Null after a failed (re)build, or after an internal error until the
    // next call rebuilds it (`rebuild_`).
    std::unique_ptr<rust::Box<FetchCursor>> fetch_ TF_GUARDED_BY(mu_);
    bool rebuild_ TF_GUARDED_BY(mu_) = false;
    uint64_t emitted_ TF_GUARDED_BY(mu_) = 0;  // Position in the epoch order.
    // The current window's ids; its payloads are served by `fetch_` in place.
    rust::Vec<uint64_t> block_ids_ TF_GUARDED_BY(mu_);
    size_t block_pos_ TF_GUARDED_BY(mu_) = 0;
    bool block_ok_ TF_GUARDED_BY(mu_) = false;
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
  std::vector<std::string> filenames;
  OP_REQUIRES_OK(ctx, ReadStringList(ctx, kFileNames, &filenames));
  OP_REQUIRES(ctx, !filenames.empty(),
              errors::InvalidArgument("`filenames` must not be empty"));
  std::vector<std::string> offset_tables;
  OP_REQUIRES_OK(ctx, ReadStringList(ctx, kOffsetTables, &offset_tables));
  OP_REQUIRES(
      ctx, offset_tables.empty() || offset_tables.size() == filenames.size(),
      errors::InvalidArgument("got ", offset_tables.size(),
                              " offset tables for ", filenames.size(),
                              " files: give one per file, or none"));

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
  OP_REQUIRES(ctx, num_shards >= 1,
              errors::InvalidArgument("`num_shards` must be >= 1, got ",
                                      num_shards));
  OP_REQUIRES(ctx, shard_index >= 0 && shard_index < num_shards,
              errors::InvalidArgument("`shard_index` must be in [0, ",
                                      num_shards, "), got ", shard_index));

  std::unique_ptr<rust::Box<LirsReader>> reader;
  OP_REQUIRES_OK(
      ctx, OpenReader(filenames, offset_tables, page_size_, backend_,
                      trust_table_, &reader));
  uint64_t shard_len = 0;
  OP_REQUIRES_OK(ctx, [&]() -> absl::Status {
    LIRS_RETURN_IF_RUST_ERROR(
        "", shard_len = (*reader)->shard_len(num_shards, shard_index));
    return absl::OkStatus();
  }());

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
