// LIRSDataset: full-range shuffled reading of TFRecord files through offset
// tables. TensorFlow glue only, shaped like tf_record_dataset_op.cc: the kernel
// reads its inputs and builds a Dataset; each Iterator holds one Rust
// DatasetCursor (crates/tfrecord-lirs/src/cursor.rs, via the cxx bridge in
// crates/tfrecord-lirs-ffi), which decides the epoch walk: order, fetch windows
// and read-ahead, batches (kept across errors; drop_remainder), the error policy
// (every error passes one position, as TFRecordDataset), unordered delivery,
// a fresh fetch after an internal error, and the checkpoint state. Here: tensors
// and tstring views, seeds, checkpoint keys, statuses.
//
// Seeds follow ShuffleDatasetV3's seed-generator protocol, so
// reshuffle_each_iteration and tf.random.set_seed behave as with
// Dataset.shuffle: RandomSeedGenerator (reshuffle) gives every new iterator a
// fresh (s1, s2) pair from a Philox stream keyed by (seed, seed2),
// FixedSeedGenerator the same pair each time; seed == seed2 == 0 means random.
// Checkpoint keys: seed, seed2 (the pair drawn), position, delivered_after and
// order_version (the cursor's state: positions, never payloads; a checkpoint
// without order_version predates it and is version 1), num_random_samples, and
// shard_state (Rust's bytes: the same state with the shard and where the walk
// started, for elastic resume; absent in older checkpoints).
// Elastic resume (docs/FORMAT.md §6): with the `epoch_state` attr (bytes from
// combine_shard_states), the dataset's first iterator starts at that state's
// seeds and walks its shard of what the state has not delivered; the next
// iterators draw seeds as a fresh run.
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
using ::tfrecord_lirs::ffi::BatchView;
using ::tfrecord_lirs::ffi::DatasetCursor;
using ::tfrecord_lirs::ffi::LirsReader;
namespace attr = ::tfrecord_lirs::attr;
namespace ffi = ::tfrecord_lirs::ffi;

constexpr char kLirsResourceContainer[] = "tfrecord_lirs";

rust::Slice<const uint8_t> AsBytes(absl::string_view s) {
  return rust::Slice<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()),
                                    s.size());
}

// A batch's records (Rust owns the fetch windows they were read into), shared by
// reference count between every tstring of the batch tensor: the windows go back
// to the fetch for reuse when the last of those is gone.
using BatchOwner = tstring::owner<rust::Box<BatchView>>;

}  // namespace

class LIRSDatasetOp : public DatasetOpKernel {
 public:
  static constexpr const char* const kDatasetType = "LIRS";
  static constexpr const char* const kReshuffleEachIteration =
      "reshuffle_each_iteration";
  static constexpr const char* const kBatchSize = "batch_size";
  static constexpr const char* const kDropRemainder = "drop_remainder";
  static constexpr const char* const kNumParallelReads = "num_parallel_reads";
  static constexpr const char* const kDeterministic = "deterministic";
  static constexpr const char* const kOrderVersion = "order_version";
  static constexpr const char* const kEpochState = "epoch_state";

  // The op's attrs (Rust checks them: the backend here, batch_size and
  // num_parallel_reads in MakeDataset).
  struct Attrs {
    bool reshuffle = true;
    int64_t page_size = 4096;
    int64_t batch_size = 0;
    bool drop_remainder = false;
    int64_t num_parallel_reads = -1;
    std::string backend = "auto";
    bool trust_table = false;
    int64_t order_version = 1;
    std::string epoch_state;
  };

  explicit LIRSDatasetOp(OpKernelConstruction* ctx) : DatasetOpKernel(ctx) {
    Attrs& a = attrs_;
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kReshuffleEachIteration, &a.reshuffle));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(attr::kPageSize, &a.page_size));
    OP_REQUIRES(ctx, a.page_size > 0,
                errors::InvalidArgument("`page_size` must be positive, got ",
                                        a.page_size));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kBatchSize, &a.batch_size));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kDropRemainder, &a.drop_remainder));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kNumParallelReads, &a.num_parallel_reads));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(attr::kBackend, &a.backend));
    OP_REQUIRES_OK(ctx, CallRust("", [&](ffi::Status& st) {
                     ffi::check_backend(a.backend, st);
                   }));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(attr::kTrustTable, &a.trust_table));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kOrderVersion, &a.order_version));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kEpochState, &a.epoch_state));
    if (!a.epoch_state.empty()) {
      // Checked (and its seeds read) now, not at the first iteration.
      OP_REQUIRES_OK(ctx, CallRust("LIRSDataset epoch_state: ",
                                   [&](ffi::Status& st) {
                                     epoch_seeds_ = ffi::epoch_state_seeds(
                                         AsBytes(a.epoch_state), st);
                                   }));
    }
    std::string deterministic;
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kDeterministic, &deterministic));
    OP_REQUIRES_OK(ctx,
                   DeterminismPolicy::FromString(deterministic, &deterministic_));
  }

 protected:
  void MakeDataset(OpKernelContext* ctx, DatasetBase** output) override;

 private:
  struct Inputs;
  class Dataset;
  Attrs attrs_;
  DeterminismPolicy deterministic_;
  // The seeds of the `epoch_state` attr's iteration (when it is set).
  ffi::IterationSeeds epoch_seeds_{};
};

// What MakeDataset reads from the inputs, for the Dataset to keep.
struct LIRSDatasetOp::Inputs {
  std::vector<std::string> filenames;
  std::vector<std::string> offset_tables;
  // The cursor config of every iteration (seeds and delivery set per iterator).
  ffi::CursorConfig config{};
  int64_t seed = 0, seed2 = 0;
};

class LIRSDatasetOp::Dataset : public DatasetBase {
 public:
  Dataset(OpKernelContext* ctx, const Attrs& attrs,
          const ffi::IterationSeeds& epoch_seeds,
          DeterminismPolicy deterministic, Inputs&& in,
          rust::Box<LirsReader> reader, int64_t shard_len,
          SeedGeneratorManager* manager, ResourceHandle&& resource_handle,
          bool owns_resource)
      : DatasetBase(DatasetContext(ctx)),
        attrs_(attrs),
        epoch_seeds_(epoch_seeds),
        deterministic_(deterministic),
        in_(std::move(in)),
        output_shapes_({attrs.batch_size == 0 ? PartialTensorShape({})
                        : attrs.drop_remainder
                            ? PartialTensorShape({attrs.batch_size})
                            : PartialTensorShape({-1})}),
        reader_(std::move(reader)),
        shard_len_(shard_len),
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

  // Instances in this shard, or batches of them (unknown when the first
  // iteration resumes an epoch state: it is shorter than the others).
  int64_t CardinalityInternal(CardinalityOptions options) const override {
    if (!attrs_.epoch_state.empty()) return kUnknownCardinality;
    const int64_t b = attrs_.batch_size, n = shard_len_;
    if (b == 0) return n;
    return attrs_.drop_remainder ? n / b : (n + b - 1) / b;
  }

  absl::Status InputDatasets(
      std::vector<const DatasetBase*>* inputs) const override {
    return absl::OkStatus();
  }

  absl::Status CheckExternalState() const override { return absl::OkStatus(); }

 protected:
  absl::Status AsGraphDefInternal(SerializationContext* ctx,
                                  DatasetGraphDefBuilder* b,
                                  Node** output) const override {
    std::vector<Node*> inputs(8);
    TF_RETURN_IF_ERROR(b->AddVector(in_.filenames, &inputs[0]));
    TF_RETURN_IF_ERROR(b->AddVector(in_.offset_tables, &inputs[1]));
    TF_RETURN_IF_ERROR(b->AddScalar(in_.config.page_aware, &inputs[2]));
    TF_RETURN_IF_ERROR(b->AddScalar(in_.seed, &inputs[3]));
    TF_RETURN_IF_ERROR(b->AddScalar(in_.seed2, &inputs[4]));
    // The handle of the generator this dataset uses, so a dataset rebuilt from
    // this graph (tf.data rewrites) shares it and keeps reshuffling.
    Tensor handle(DT_RESOURCE, TensorShape({}));
    handle.scalar<ResourceHandle>()() = resource_handle_;
    TF_RETURN_IF_ERROR(b->AddTensor(handle, &inputs[5]));
    TF_RETURN_IF_ERROR(b->AddScalar(in_.config.num_shards, &inputs[6]));
    TF_RETURN_IF_ERROR(b->AddScalar(in_.config.shard_index, &inputs[7]));
    // Each attr as the AttrValue the graph stores.
    auto attr_value = [b](const auto& value) {
      AttrValue out;
      b->BuildAttrValue(value, &out);
      return out;
    };
    return b->AddDataset(
        this, inputs,
        {{kReshuffleEachIteration, attr_value(attrs_.reshuffle)},
         {attr::kPageSize, attr_value(attrs_.page_size)},
         {kBatchSize, attr_value(attrs_.batch_size)},
         {kDropRemainder, attr_value(attrs_.drop_remainder)},
         {kNumParallelReads, attr_value(attrs_.num_parallel_reads)},
         {attr::kBackend, attr_value(attrs_.backend)},
         {attr::kTrustTable, attr_value(attrs_.trust_table)},
         {kOrderVersion, attr_value(attrs_.order_version)},
         {kEpochState, attr_value(attrs_.epoch_state)},
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
    // The order algorithm of the state; absent in checkpoints that predate it
    // (version 1).
    static constexpr const char* const kOrderVersionKey = "order_version";
    // The state with its shard and where the walk started (elastic resume).
    static constexpr const char* const kShardStateKey = "shard_state";

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
      const Dataset* d = dataset();
      elastic_start_ = !d->attrs_.epoch_state.empty() &&
                       !d->epoch_state_taken_.exchange(true);
      if (elastic_start_) {
        // The epoch state's iteration; the generator then goes on as it did.
        const ffi::IterationSeeds& s = d->epoch_seeds_;
        seed_ = s.seed;
        seed2_ = s.seed2;
        seed_generator_->set_num_random_samples(s.num_random_samples);
        seed_generator_->Reset();
      } else {
        seed_generator_->GenerateSeeds(&seed_, &seed2_);
      }
      return StartLocked(ffi::CursorCheckpoint{0, false, {}, 0, {}},
                         "LIRSDataset: ");
    }

    absl::Status GetNextInternal(IteratorContext* ctx,
                                 std::vector<Tensor>* out_tensors,
                                 bool* end_of_sequence) override {
      mutex_lock l(mu_);
      if (dataset()->attrs_.batch_size == 0) {
        // A single element views its record only when Rust says the view pins
        // nothing else (a large record fetched on its own); otherwise it is
        // copied: a view would keep its whole window alive (e.g. in a downstream
        // shuffle buffer).
        std::unique_ptr<rust::Box<BatchView>> one;
        TF_RETURN_IF_ERROR(CallRust("LIRSDataset: ", [&](ffi::Status& st) {
          one = std::make_unique<rust::Box<BatchView>>(
              (*cursor_)->next_element_view(st));
        }));
        *end_of_sequence = (*one)->len() == 0;
        if (*end_of_sequence) return absl::OkStatus();
        const rust::Slice<const uint8_t> p = (*one)->record(0);
        const char* data = reinterpret_cast<const char*>(p.data());
        out_tensors->emplace_back(ctx->allocator({}), DT_STRING, TensorShape{});
        tstring& element = out_tensors->back().scalar<tstring>()();
        if ((*one)->may_view() && p.size() > TF_TString_SmallCapacity) {
          core::RefCountPtr<BatchOwner> owner(new BatchOwner(std::move(*one)));
          element.assign_as_shared_view(data, p.size(), owner.get());
        } else {
          element.assign(data, p.size());
        }
        return absl::OkStatus();
      }
      // A batch formed in Rust (the paper's random assignment table -> batches):
      // no per-element tf.data overhead, and no copy: each string views its
      // record where the fetch read it, all of them sharing one owner of the
      // batch. Records that fit in a tstring's inline buffer are copied.
      std::unique_ptr<rust::Box<BatchView>> batch;
      TF_RETURN_IF_ERROR(CallRust("LIRSDataset: ", [&](ffi::Status& st) {
        batch = std::make_unique<rust::Box<BatchView>>(
            (*cursor_)->next_batch(st));
      }));
      const size_t n = (*batch)->len();
      *end_of_sequence = n == 0;
      if (n == 0) return absl::OkStatus();
      core::RefCountPtr<BatchOwner> owner(new BatchOwner(std::move(*batch)));
      const BatchView& view = *owner->value();
      out_tensors->emplace_back(ctx->allocator({}), DT_STRING,
                                TensorShape({static_cast<int64_t>(n)}));
      auto flat = out_tensors->back().flat<tstring>();
      for (size_t i = 0; i < n; ++i) {
        const rust::Slice<const uint8_t> r = view.record(i);
        const char* data = reinterpret_cast<const char*>(r.data());
        if (r.size() > TF_TString_SmallCapacity) {
          flat(i).assign_as_shared_view(data, r.size(), owner.get());
        } else {
          flat(i).assign(data, r.size());
        }
      }
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
      ffi::CursorCheckpoint ckpt;
      TF_RETURN_IF_ERROR(
          CallRust("LIRSDataset checkpoint: ", [&](ffi::Status& st) {
            ckpt = (*cursor_)->checkpoint(
                ffi::IterationSeeds{seed_, seed2_,
                                    seed_generator_->num_random_samples()},
                st);
          }));
      TF_RETURN_IF_ERROR(writer->WriteScalar(prefix(), kSeedKey, seed_));
      TF_RETURN_IF_ERROR(writer->WriteScalar(prefix(), kSeed2Key, seed2_));
      TF_RETURN_IF_ERROR(
          writer->WriteScalar(prefix(), kPositionKey, ckpt.position));
      TF_RETURN_IF_ERROR(
          writer->WriteScalar(prefix(), kOrderVersionKey, ckpt.order_version));
      if (ckpt.has_delivered_after) {
        const auto& after = ckpt.delivered_after;
        Tensor t(DT_INT64, TensorShape({static_cast<int64_t>(after.size())}));
        std::copy(after.begin(), after.end(), t.flat<int64_t>().data());
        TF_RETURN_IF_ERROR(writer->WriteTensor(prefix(), kDeliveredAfterKey, t));
      }
      TF_RETURN_IF_ERROR(writer->WriteScalar(
          prefix(), kShardStateKey,
          tstring(reinterpret_cast<const char*>(ckpt.shard_state.data()),
                  ckpt.shard_state.size())));
      return writer->WriteScalar(prefix(), kNumRandomSamples,
                                 seed_generator_->num_random_samples());
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
      ffi::CursorCheckpoint ckpt{0, false, {}, 1, {}};
      TF_RETURN_IF_ERROR(
          reader->ReadScalar(prefix(), kPositionKey, &ckpt.position));
      if (reader->Contains(prefix(), kOrderVersionKey)) {
        TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), kOrderVersionKey,
                                              &ckpt.order_version));
      }
      if (reader->Contains(prefix(), kDeliveredAfterKey)) {
        Tensor t;
        TF_RETURN_IF_ERROR(reader->ReadTensor(prefix(), kDeliveredAfterKey, &t));
        ckpt.has_delivered_after = true;
        auto flat = t.flat<int64_t>();
        for (int64_t i = 0; i < flat.size(); ++i) {
          ckpt.delivered_after.push_back(flat(i));
        }
      }
      if (reader->Contains(prefix(), kShardStateKey)) {
        tstring state;
        TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), kShardStateKey, &state));
        for (const char c : absl::string_view(state)) {
          ckpt.shard_state.push_back(static_cast<uint8_t>(c));
        }
      }
      // The checkpoint says where its walk started, not the epoch_state attr.
      elastic_start_ = false;
      return StartLocked(ckpt, "LIRSDataset checkpoint: ");
    }

   private:
    // A cursor over this iteration's order at `ckpt`; the current one is kept
    // if that fails.
    absl::Status StartLocked(const ffi::CursorCheckpoint& ckpt,
                             absl::string_view context)
        TF_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      ffi::CursorConfig config = dataset()->in_.config;
      config.seed = seed_;
      config.seed2 = seed2_;
      config.unordered = unordered_;
      if (elastic_start_) {
        for (const char c : dataset()->attrs_.epoch_state) {
          config.epoch_state.push_back(static_cast<uint8_t>(c));
        }
      }
      return CallRust(context, [&](ffi::Status& st) {
        cursor_ = std::make_unique<rust::Box<DatasetCursor>>(
            dataset()->reader_->fetch(config, ckpt, st));
      });
    }

    mutex mu_;
    bool unordered_ TF_GUARDED_BY(mu_) = false;
    // This iteration starts from the dataset's epoch_state (elastic resume).
    bool elastic_start_ TF_GUARDED_BY(mu_) = false;
    std::shared_ptr<SeedGenerator> seed_generator_;
    int64_t seed_ TF_GUARDED_BY(mu_) = 0;
    int64_t seed2_ TF_GUARDED_BY(mu_) = 0;
    std::unique_ptr<rust::Box<DatasetCursor>> cursor_ TF_GUARDED_BY(mu_);
  };

  const Attrs attrs_;
  const ffi::IterationSeeds epoch_seeds_;
  // Whether an iterator started from the epoch_state attr (only the first does).
  mutable std::atomic<bool> epoch_state_taken_{false};
  const DeterminismPolicy deterministic_;
  const Inputs in_;
  const std::vector<PartialTensorShape> output_shapes_;
  const rust::Box<LirsReader> reader_;
  const int64_t shard_len_;
  SeedGeneratorManager* const manager_;  // Owns one reference.
  const ResourceHandle resource_handle_;
  ResourceMgr* const resource_mgr_;  // Not owned.
  const bool owns_resource_;
};

void LIRSDatasetOp::MakeDataset(OpKernelContext* ctx, DatasetBase** output) {
  Inputs in;
  for (auto [name, out] : {std::pair{attr::kFileNames, &in.filenames},
                           std::pair{attr::kOffsetTables, &in.offset_tables}}) {
    const Tensor* t;
    OP_REQUIRES_OK(ctx, ctx->input(name, &t));
    OP_REQUIRES_OK(ctx, ::tfrecord_lirs::StringList(*t, name, out));
  }
  ffi::CursorConfig& config = in.config;
  OP_REQUIRES_OK(ctx, ParseScalarArgument(ctx, "page_aware", &config.page_aware));
  OP_REQUIRES_OK(ctx, ParseScalarArgument(ctx, "seed", &in.seed));
  OP_REQUIRES_OK(ctx, ParseScalarArgument(ctx, "seed2", &in.seed2));
  OP_REQUIRES_OK(ctx, ParseScalarArgument(ctx, "num_shards", &config.num_shards));
  OP_REQUIRES_OK(ctx,
                 ParseScalarArgument(ctx, "shard_index", &config.shard_index));
  config.batch_size = attrs_.batch_size;
  config.drop_remainder = attrs_.drop_remainder;
  config.num_parallel_reads = attrs_.num_parallel_reads;
  config.order_version = attrs_.order_version;
  // Checked before any file is opened.
  OP_REQUIRES_OK(ctx, CallRust("", [&](ffi::Status& st) {
                   ffi::check_shard(config.num_shards, config.shard_index, st);
                 }));

  std::unique_ptr<rust::Box<LirsReader>> reader;
  uint64_t shard_len = 0;
  OP_REQUIRES_OK(ctx, CallRust("", [&](ffi::Status& st) {
                   reader = std::make_unique<rust::Box<LirsReader>>(
                       ffi::open_reader(::tfrecord_lirs::MakeReaderConfig(
                                            in.filenames, in.offset_tables,
                                            attrs_.page_size, attrs_.backend,
                                            attrs_.trust_table),
                                        st));
                   shard_len = (*reader)->shard_len(config.num_shards,
                                                    config.shard_index, st);
                   // Now, not at the first iteration.
                   (*reader)->check_dataset(config.batch_size,
                                            config.num_parallel_reads,
                                            config.order_version, st);
                 }));

  // Seed generator: the ShuffleDatasetV3 protocol. Python passes a dummy
  // handle; if nothing is registered under it, this dataset creates (and owns)
  // a generator under a fresh name, and serializes that name so rebuilt copies
  // of the dataset share it.
  RandomSeeds seeds(in.seed, in.seed2);
  ResourceHandle handle = HandleFromInput(ctx, 5);
  SeedGeneratorManager* manager = nullptr;
  absl::Status s = ctx->resource_manager()->Lookup<SeedGeneratorManager>(
      handle.container(), handle.name(), &manager);
  bool owns_resource = false;
  if (absl::IsNotFound(s)) {
    static std::atomic<int64_t> resource_counter(0);
    const std::string name = absl::StrCat(
        ctx->op_kernel().name(), "/seed_generator_", resource_counter++);
    const bool reshuffle = attrs_.reshuffle;
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

  *output = new Dataset(ctx, attrs_, epoch_seeds_, deterministic_, std::move(in),
                        std::move(*reader), static_cast<int64_t>(shard_len),
                        manager, std::move(handle), owns_resource);
}

namespace {
REGISTER_KERNEL_BUILDER(Name("LIRSDataset").Device(DEVICE_CPU), LIRSDatasetOp);
}  // namespace

}  // namespace data
}  // namespace tensorflow
